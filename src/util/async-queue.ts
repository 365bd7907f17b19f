// A single-consumer async queue: a producer task pushes, the consumer iterates with for-await.
export class AsyncQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private ended = false;
  private failure: unknown;
  private wake: (() => void) | undefined;

  push(item: T): void {
    if (this.ended) return;
    this.items.push(item);
    this.notify();
  }

  end(): void {
    this.ended = true;
    this.notify();
  }

  fail(error: unknown): void {
    this.failure = error ?? new Error('queue failed');
    this.ended = true;
    this.notify();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      if (this.items.length > 0) {
        yield this.items.shift()!;
        continue;
      }
      if (this.failure !== undefined) throw this.failure;
      if (this.ended) return;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}
