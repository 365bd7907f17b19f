// A Map bounded to `max` entries that forgets the least recently touched key first. Per-device tables use it
// so a stream of made-up device ids cannot grow memory (or timers: `onEvict` clears them) without bound.
export class LruMap<K, V> {
  private readonly map = new Map<K, V>();

  constructor(
    readonly max: number,
    private readonly onEvict?: (key: K, value: V) => void,
  ) {
    if (!(max >= 1)) throw new RangeError('LruMap max must be at least 1');
  }

  get size(): number {
    return this.map.size;
  }

  has(key: K): boolean {
    return this.map.has(key);
  }

  /** Reads without refreshing the key's age. */
  peek(key: K): V | undefined {
    return this.map.get(key);
  }

  /** Reads and marks the key as the most recently used. */
  get(key: K): V | undefined {
    if (!this.map.has(key)) return undefined;
    const value = this.map.get(key) as V;
    this.map.delete(key);
    this.map.set(key, value);
    return value;
  }

  set(key: K, value: V): this {
    this.map.delete(key);
    this.map.set(key, value);
    while (this.map.size > this.max) {
      const oldest = this.map.keys().next();
      if (oldest.done) break;
      const evicted = this.map.get(oldest.value) as V;
      this.map.delete(oldest.value);
      this.onEvict?.(oldest.value, evicted);
    }
    return this;
  }

  delete(key: K): boolean {
    return this.map.delete(key);
  }

  clear(): void {
    this.map.clear();
  }

  keys(): IterableIterator<K> {
    return this.map.keys();
  }

  values(): IterableIterator<V> {
    return this.map.values();
  }

  entries(): IterableIterator<[K, V]> {
    return this.map.entries();
  }
}
