// Wake words: the texts a client sends in `listen detect` when its on-device detector fired. Pure.
// Such a detect is not a question: it never becomes a model turn (the robot greets, or says nothing).

/**
 * The stock xiaozhi wake words (the reference xiaozhi-esp32-server's default `wakeup_words`): clients built for
 * it (the ESP32 firmware's stock models, the browser test page, py-xiaozhi) send these on every wake.
 */
export const STOCK_XIAOZHI_WAKE_WORDS: readonly string[] = [
  '你好小智',
  '嘿你好呀',
  '你好小志',
  '小爱同学',
  '你好小鑫',
  '你好小新',
  '小美同学',
  '小龙小龙',
  '喵喵同学',
  '小滨小滨',
  '小冰小冰',
  // py-xiaozhi sends this fixed text ("wake up") whatever its keyword spotter heard.
  '唤醒',
];

/** Lower case, punctuation and emoji removed, spaces collapsed: "Hey, Pip!" and "hey pip" are one wake word. */
export function normaliseWakeText(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s]+/gu, '')
    .replace(/\s+/g, ' ')
    .trim();
}

/** Ours (the bare robot name and hi/hey/hello/ok + name) beside the stock xiaozhi list. */
export function defaultWakeWords(robotName: string): string[] {
  const name = normaliseWakeText(robotName);
  return [name, `hi ${name}`, `hey ${name}`, `hello ${name}`, `ok ${name}`, ...STOCK_XIAOZHI_WAKE_WORDS];
}

export class WakeWordList {
  private readonly words: ReadonlySet<string>;

  constructor(words: readonly string[]) {
    this.words = new Set(words.map(normaliseWakeText).filter(Boolean));
  }

  /** The whole detect text is a wake word (a question that starts with one is still a question). */
  matches(text: string): boolean {
    return this.words.has(normaliseWakeText(text));
  }

  get size(): number {
    return this.words.size;
  }
}
