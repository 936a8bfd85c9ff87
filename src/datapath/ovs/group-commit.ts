/**
 * Group commit of like requests to the switch: what callers submit while one batch is in flight goes
 * out together in the next. A burst of 100 DELs then costs ovs-vswitchd a few reconfigurations (one
 * per OVSDB transaction) and a few barriers, not 100 of each. Every caller of a batch gets its
 * outcome: all resolve, or all reject with the batch's error.
 */
export class GroupCommit<T> {
  readonly #run: (items: T[]) => Promise<void>;
  #queue: Array<{ item: T; resolve: () => void; reject: (err: unknown) => void }> = [];
  #draining = false;

  constructor(run: (items: T[]) => Promise<void>) {
    this.#run = run;
  }

  /** Resolves once a batch holding `item` is done. */
  submit(item: T): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ item, resolve, reject });
      if (!this.#draining) void this.#drain();
    });
  }

  async #drain(): Promise<void> {
    this.#draining = true;
    try {
      while (this.#queue.length > 0) {
        // The callers of this turn of the event loop join the first batch.
        await new Promise<void>((resolve) => setImmediate(resolve));
        const batch = this.#queue;
        this.#queue = [];
        try {
          await this.#run(batch.map((b) => b.item));
          for (const b of batch) b.resolve();
        } catch (err) {
          for (const b of batch) b.reject(err);
        }
      }
    } finally {
      this.#draining = false;
    }
  }
}
