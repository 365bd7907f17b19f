// One interface for every speech recogniser: 16 kHz mono PCM of one utterance in, text out.
export interface AsrProvider {
  readonly name: string;
  transcribe(pcm16k: Int16Array, signal: AbortSignal, context?: TranscribeContext): Promise<string>;
  describe(): string;
  close?(): void;
}

/** Who the utterance belongs to: a shared recogniser queues fairly per device. */
export interface TranscribeContext {
  deviceId?: string;
}
