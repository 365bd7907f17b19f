// One interface for every speech synthesiser: text in, mono PCM chunks out as soon as they exist.
export interface TtsProvider {
  readonly name: string;
  /** Sample rate of the PCM it yields. */
  readonly sampleRate: number;
  synthesize(text: string, signal: AbortSignal): AsyncIterable<Int16Array>;
  describe(): string;
  close?(): void;
}
