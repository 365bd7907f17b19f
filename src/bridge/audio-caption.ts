// Security mode's audio captions: the last seconds of the robot's microphone (from the voice server) described
// by an OpenAI-compatible audio model (AUDIO_CAPTION_MODEL), sent as an `input_audio` WAV part.
import { type Endpoint, joinUrl } from '../providers/openai-client.js';
import { VoiceCallError, type VoiceClient } from './voice-client.js';

export interface CaptionOptions {
  voice: VoiceClient;
  model: Endpoint & { model: string };
  seconds?: number;
  timeoutMs?: number;
}

export async function captionSound(deviceId: string, options: CaptionOptions): Promise<string> {
  let wav: string;
  try {
    const capture = await options.voice.post<{ wav_base64: string }>('capture-audio', {
      seconds: options.seconds ?? 5,
      device_id: deviceId,
    });
    wav = capture.wav_base64;
  } catch (error) {
    if (error instanceof VoiceCallError && error.code === 'no_audio') return 'no sound was recorded';
    throw error;
  }
  if (!options.model.apiKey) return 'sound recorded; audio captions are unavailable (no cloud API key)';
  const response = await fetch(joinUrl(options.model.url, 'chat/completions'), {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${options.model.apiKey}` },
    body: JSON.stringify({
      model: options.model.model,
      stream: false,
      max_tokens: 120,
      messages: [
        {
          role: 'user',
          content: [
            {
              type: 'text',
              text: 'You are a home security microphone. In one short sentence, describe what you hear.',
            },
            { type: 'input_audio', input_audio: { data: wav, format: 'wav' } },
          ],
        },
      ],
    }),
    signal: AbortSignal.timeout(options.timeoutMs ?? 20_000),
  });
  if (!response.ok) throw new Error(`audio caption model answered HTTP ${response.status}`);
  const body = (await response.json()) as { choices?: Array<{ message?: { content?: string } }> };
  return body.choices?.[0]?.message?.content?.trim() || 'the audio caption model returned nothing';
}
