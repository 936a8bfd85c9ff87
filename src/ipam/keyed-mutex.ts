/**
 * Runs async sections one at a time per key; different keys proceed in parallel.
 * Invariant: `tails` holds a key only while a section for it is queued or running, so the map
 * does not grow with the number of keys ever seen.
 */
export class KeyedMutex {
  readonly #tails = new Map<string, Promise<void>>();

  /** Runs `section` after every earlier section of the same key has settled (whatever its outcome). */
  async run<T>(key: string, section: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(key) ?? Promise.resolve();
    let done!: () => void;
    const tail = new Promise<void>((resolve) => {
      done = resolve;
    });
    this.#tails.set(key, tail);
    try {
      // Tails only ever resolve: a section's outcome belongs to its own caller.
      await previous;
      return await section();
    } finally {
      done();
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    }
  }

  /** Number of keys with a section queued or running. */
  get size(): number {
    return this.#tails.size;
  }
}
