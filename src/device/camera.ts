// The virtual robot's camera: renders a small scene and posts it as the firmware does — multipart
// `question` + JPEG `file` to the vision URL from MCP initialize, with its bearer token and Device-Id.
import jpeg from 'jpeg-js';

export interface Scene {
  /** Background and one object in the middle, as RGB. */
  background: [number, number, number];
  object: [number, number, number];
}

export const DEFAULT_SCENE: Scene = { background: [200, 170, 120], object: [200, 30, 30] };

/** A 320×240 JPEG of the scene: a background with a vertical shade and a centred object. */
export function renderJpeg(scene: Scene, width = 320, height = 240): Uint8Array {
  const data = Buffer.alloc(width * height * 4);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const inObject = Math.abs(x - width / 2) < width / 6 && Math.abs(y - height / 2) < height / 5;
      const shade = 0.75 + (0.25 * y) / height;
      const [r, g, b] = inObject ? scene.object : scene.background.map((c) => c * shade);
      const i = (y * width + x) * 4;
      data[i] = r!;
      data[i + 1] = g!;
      data[i + 2] = b!;
      data[i + 3] = 255;
    }
  }
  return new Uint8Array(jpeg.encode({ data, width, height }, 80).data);
}

export interface CameraTarget {
  url?: string;
  token?: string;
  deviceId: string;
  clientId: string;
}

/** Uploads a photo and returns the vision endpoint's reply body as text (the tool result). */
export async function explainPhoto(
  target: CameraTarget,
  question: string,
  photo: Uint8Array,
  timeoutMs = 15_000,
): Promise<string> {
  if (!target.url) throw new Error('Camera explain URL is not set (no MCP initialize yet)');
  const form = new FormData();
  form.append('question', question);
  form.append('file', new Blob([photo], { type: 'image/jpeg' }), 'camera.jpg');
  const response = await fetch(target.url, {
    method: 'POST',
    headers: {
      ...(target.token ? { Authorization: `Bearer ${target.token}` } : {}),
      'Device-Id': target.deviceId,
      'Client-Id': target.clientId,
    },
    body: form,
    signal: AbortSignal.timeout(timeoutMs),
  });
  const body = await response.text();
  if (!response.ok) throw new Error(`Failed to upload photo: HTTP ${response.status} ${body.slice(0, 200)}`);
  return body;
}
