// The vision endpoint the device's camera posts to (URL and token handed over in MCP initialize):
// multipart `question` + JPEG `file`, exactly as the firmware sends it. The photo goes to an
// OpenAI-compatible vision model as an image_url data URI; the answer goes back to the device, which
// returns it as its take_photo tool result.
import multipart from '@fastify/multipart';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Config } from '../config/index.js';
import { type Endpoint, joinUrl } from '../providers/openai-client.js';
import { HttpError } from '../util/http-error.js';
import type { Logger } from '../util/log.js';
import type { DeviceRegistry } from './registry.js';
import type { DeviceSession } from './session.js';

export const VISION_PATH = '/mcp/vision/explain';
const MAX_PHOTO_BYTES = 2 * 1024 * 1024;
const MAX_FIELDS = 8;

export interface VisionOptions {
  registry: DeviceRegistry<DeviceSession>;
  /** The VLM endpoint and model; apiKey '' with a non-local URL means vision is unavailable. */
  vlm: Endpoint & { model: string };
  available: () => boolean;
  timeoutMs: number;
  logger: Logger;
}

export async function registerVision(app: FastifyInstance, options: VisionOptions): Promise<void> {
  await app.register(multipart, {
    limits: { fileSize: MAX_PHOTO_BYTES, files: 1, fields: MAX_FIELDS, fieldSize: 4096 },
  });
  app.post(VISION_PATH, async (request) => {
    const deviceId = String(request.headers['device-id'] ?? '').toLowerCase();
    const token = String(request.headers.authorization ?? '').replace(/^Bearer\s+/i, '');
    const session = options.registry.get(deviceId);
    if (!session || !token || token !== session.visionToken) {
      throw new HttpError(
        401,
        'bad_vision_token',
        'Device-Id and the bearer token from initialize are required',
      );
    }
    if (!request.isMultipart())
      throw new HttpError(400, 'not_multipart', 'post multipart/form-data with question and file');
    const { question, photo } = await readPhoto(request);
    if (!photo || photo.length < 4 || photo[0] !== 0xff || photo[1] !== 0xd8) {
      throw new HttpError(400, 'not_a_jpeg', 'the file part must be a JPEG image');
    }
    if (!options.available()) {
      return { success: false, message: 'vision is unavailable: no vision API key is configured' };
    }
    try {
      const text = await describe(options, question, photo);
      options.logger.info({ device: deviceId, bytes: photo.length }, 'photo described');
      return { success: true, action: 'RESPONSE', response: text };
    } catch (error) {
      options.logger.warn({ err: (error as Error).message }, 'vision model failed');
      return { success: false, message: `vision model failed: ${(error as Error).message}` };
    }
  });
}

/** The upload's question and photo; a malformed or oversized upload is the caller's error (400/413), never a 500. */
async function readPhoto(request: FastifyRequest): Promise<{ question: string; photo: Buffer | undefined }> {
  let question = 'Describe what you see.';
  let photo: Buffer | undefined;
  try {
    for await (const part of request.parts()) {
      if (part.type === 'file') {
        photo = await part.toBuffer();
        if (part.file.truncated) throw photoTooLarge();
      } else if (part.fieldname === 'question' && typeof part.value === 'string' && part.value.trim()) {
        question = part.value.trim();
      }
    }
  } catch (error) {
    if (error instanceof HttpError) throw error;
    const code = (error as { code?: string }).code;
    if (code === 'FST_REQ_FILE_TOO_LARGE') throw photoTooLarge();
    if (code === 'FST_FILES_LIMIT' || code === 'FST_FIELDS_LIMIT' || code === 'FST_PARTS_LIMIT') {
      throw new HttpError(413, 'too_many_parts', `send one file and at most ${MAX_FIELDS} fields`);
    }
    // busboy's own complaints (no boundary, the body ends mid-part) carry no status: they are bad input.
    throw new HttpError(400, 'bad_multipart', `the multipart body is malformed: ${(error as Error).message}`);
  }
  return { question, photo };
}

const photoTooLarge = () =>
  new HttpError(413, 'photo_too_large', `photos are limited to ${MAX_PHOTO_BYTES} bytes`);

async function describe(options: VisionOptions, question: string, jpeg: Buffer): Promise<string> {
  const response = await fetch(joinUrl(options.vlm.url, 'chat/completions'), {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      ...(options.vlm.apiKey ? { Authorization: `Bearer ${options.vlm.apiKey}` } : {}),
    },
    body: JSON.stringify({
      model: options.vlm.model,
      stream: false,
      max_tokens: 300,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: question },
            { type: 'image_url', image_url: { url: `data:image/jpeg;base64,${jpeg.toString('base64')}` } },
          ],
        },
      ],
    }),
    signal: AbortSignal.timeout(options.timeoutMs),
  });
  if (!response.ok) throw new Error(`HTTP ${response.status}`);
  const body = (await response.json()) as { choices?: Array<{ message?: { content?: string } }> };
  const text = body.choices?.[0]?.message?.content?.trim();
  if (!text) throw new Error('the vision model returned no text');
  return text;
}

/** Vision works with a key for the cloud endpoint, or with a VLM endpoint on this machine that needs none. */
export function visionAvailable(config: Config): boolean {
  if (config.cloud.api_key) return true;
  try {
    const host = new URL(config.vision.vlm_api_url).hostname;
    return host === 'localhost' || host === '::1' || host === '[::1]' || host.startsWith('127.');
  } catch {
    return false;
  }
}
