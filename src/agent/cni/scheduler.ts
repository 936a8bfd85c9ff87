/**
 * Request scheduling (docs/architecture.md, I3): calls on the same attachment run one after another, in arrival
 * order; calls on different attachments run in parallel, at most `limit` at once.
 */
import { TryAgainError } from '../../base/errors.js';

/** Told when the scheduler goes from idle to busy and back (e.g. `IdleRelease`). Must not throw. */
export interface SchedulerHooks {
  /** A call arrived while none was running or queued. */
  busy(): void;
  /** The last running or queued call settled. */
  idle(): void;
}

/** Calls accepted at once (running, waiting for a slot or for their key); more are told to try again. */
export const MAX_PENDING = 4096;

export class Scheduler {
  readonly limit: number;
  readonly maxPending: number;
  #pending = 0;
  readonly #hooks: SchedulerHooks | undefined;
  /** Tail of the queue per key; an entry exists if and only if a call on that key is queued or running. */
  readonly #tails = new Map<string, Promise<void>>();
  #running = 0;
  readonly #waiting: Array<() => void> = [];

  constructor(limit: number, hooks?: SchedulerHooks, maxPending = MAX_PENDING) {
    if (!Number.isInteger(limit) || limit < 1)
      throw new RangeError(`scheduler limit must be >= 1, got ${limit}`);
    this.limit = limit;
    this.maxPending = maxPending;
    this.#hooks = hooks;
  }

  /** Calls in flight or waiting for a slot. */
  get inFlight(): number {
    return this.#running + this.#waiting.length;
  }

  /** Callers of `idle` waiting for the last call to settle. */
  readonly #idleWaiters: Array<() => void> = [];

  /** Resolves when no call is running or queued (e.g. a DEL's veth deletion after its answer). */
  idle(): Promise<void> {
    if (this.#tails.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Keys with a call running or queued. */
  activeKeys(): ReadonlySet<string> {
    return new Set(this.#tails.keys());
  }

  /**
   * Runs `fn` once every earlier call with the same key has settled and a slot is free. With
   * `maxPending` calls already accepted, refuses at once with ERR_TRY_AGAIN (CNI 11): the wait
   * queue is bounded, so a flood of calls cannot grow the agent's memory without end.
   */
  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    if (this.#pending >= this.maxPending) {
      throw new TryAgainError(`agent busy: ${this.#pending} calls in progress or queued`);
    }
    this.#pending++;
    try {
      return await this.#run(key, fn);
    } finally {
      this.#pending--;
    }
  }

  async #run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(key);
    let release!: () => void;
    const mine = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = previous ? previous.then(() => mine) : mine;
    if (this.#tails.size === 0) this.#hooks?.busy();
    this.#tails.set(key, tail);
    try {
      if (previous) await previous;
      await this.#acquire();
      try {
        return await fn();
      } finally {
        this.#releaseSlot();
      }
    } finally {
      release();
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
      if (this.#tails.size === 0) {
        for (const wake of this.#idleWaiters.splice(0)) wake();
        this.#hooks?.idle();
      }
    }
  }

  async #acquire(): Promise<void> {
    if (this.#running < this.limit) {
      this.#running++;
      return;
    }
    await new Promise<void>((resolve) => this.#waiting.push(resolve));
  }

  #releaseSlot(): void {
    const next = this.#waiting.shift();
    // The slot passes directly to the next waiter, so #running stays the same.
    if (next) next();
    else this.#running--;
  }
}
