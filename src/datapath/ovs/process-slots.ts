/**
 * A bound on the `ovs-ofctl` processes running at once. ovs-vswitchd refuses management connections
 * beyond what it can accept in time: with 100 pods ADDed at once, a third of the connections failed
 * with "Protocol error" (bench scenario 4); queued here they all succeed.
 */
export class ProcessSlots {
  readonly #limit: number;
  #running = 0;
  readonly #waiting: Array<() => void> = [];

  constructor(limit: number) {
    this.#limit = limit;
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#running < this.#limit) this.#running++;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve)); // the slot is handed over
    try {
      return await fn();
    } finally {
      const next = this.#waiting.shift();
      if (next) next();
      else this.#running--;
    }
  }
}
