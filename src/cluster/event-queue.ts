/**
 * An unbounded single-consumer queue that a producer pushes into and one async iterator drains.
 * The file store keeps one per watcher; unbounded is safe there because a reload produces at most
 * one event per node.
 */

export class EventQueue<T> {
  readonly #items: T[] = [];
  #ended = false;
  #wake: (() => void) | undefined;

  push(...items: T[]): void {
    if (this.#ended) return;
    this.#items.push(...items);
    this.#notify();
  }

  /** No more items; the iterator returns once it has drained what is queued. */
  end(): void {
    this.#ended = true;
    this.#notify();
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  /** Yields items until `end()` or until `signal` aborts (then it returns at once, dropping the rest). */
  async *drain(signal: AbortSignal): AsyncGenerator<T, void, undefined> {
    const onAbort = (): void => this.#notify();
    signal.addEventListener('abort', onAbort);
    try {
      for (;;) {
        if (signal.aborted) return;
        const item = this.#items.shift();
        if (item !== undefined) {
          yield item;
          continue;
        }
        if (this.#ended) return;
        await new Promise<void>((resolve) => {
          this.#wake = resolve;
        });
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }
}
