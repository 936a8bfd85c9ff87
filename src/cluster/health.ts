/**
 * The store's health: reachable or not, why, and since when. `since` changes only when `ok` flips,
 * so "unreachable since 12:00:03" stays true however many retries fail after it.
 */
import type { StoreHealth } from './store.js';

export type HealthListener = (health: StoreHealth) => void;

export class HealthState {
  #ok: boolean;
  #error: string | undefined;
  #since = new Date();
  readonly #listeners = new Set<HealthListener>();

  constructor(ok: boolean, error?: string) {
    this.#ok = ok;
    this.#error = ok ? undefined : error;
  }

  get ok(): boolean {
    return this.#ok;
  }

  snapshot(): StoreHealth {
    const h: StoreHealth = { ok: this.#ok, since: new Date(this.#since) };
    if (this.#error !== undefined) h.error = this.#error;
    return h;
  }

  markOk(): void {
    if (this.#ok) return;
    this.#ok = true;
    this.#error = undefined;
    this.#flipped();
  }

  /** Records the latest failure; listeners hear only the flip from ok. */
  markDown(error: string): void {
    this.#error = error;
    if (!this.#ok) return;
    this.#ok = false;
    this.#flipped();
  }

  /** Calls `fn` on every flip; returns the unsubscribe function. */
  onChange(fn: HealthListener): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  #flipped(): void {
    this.#since = new Date();
    const h = this.snapshot();
    for (const fn of [...this.#listeners]) fn(h);
  }
}
