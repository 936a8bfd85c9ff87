/**
 * Retry pacing: exponential backoff with jitter, and a sleep that ends early on abort or on a wake-up
 * (the health flipping), so a watcher reconnects as soon as the store is reachable again instead of
 * finishing a 5 s wait.
 */
import type { HealthState } from './health.js';

export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
}

export class Backoff {
  readonly #opts: BackoffOptions;
  #nextMs: number;

  constructor(opts: BackoffOptions) {
    this.#opts = opts;
    this.#nextMs = opts.initialMs;
  }

  /** The next delay, doubled each call up to maxMs, with ±20% jitter so that agents spread out. */
  next(): number {
    const base = this.#nextMs;
    this.#nextMs = Math.min(base * 2, this.#opts.maxMs);
    return Math.round(base * (0.8 + Math.random() * 0.4));
  }

  reset(): void {
    this.#nextMs = this.#opts.initialMs;
  }
}

/**
 * Resolves after `ms`, or at once when `signal` aborts or `health` flips (either way). Never rejects.
 * The timer is unref'd: a pending retry does not keep the process alive.
 */
export function pause(ms: number, signal: AbortSignal, health?: HealthState): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve();
      return;
    }
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      unsubscribe?.();
      resolve();
    };
    const timer = setTimeout(done, ms);
    timer.unref();
    signal.addEventListener('abort', done, { once: true });
    const unsubscribe = health?.onChange(done);
  });
}
