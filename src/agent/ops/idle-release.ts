/**
 * Gives the agent's memory back to the kernel once no CNI call has run for `quietMs` (decision 16).
 *
 * Under load, what the agent allocates for calls in flight outlives the 1 MiB young generation and
 * is promoted; dead, it waits in the old generation for V8's next full collection, which V8 starts
 * only when the old generation has grown by ~8 MiB over what is live. Buffers and other native
 * objects of that garbage hold their malloc'd memory as long. So RSS after a burst depends on where
 * the burst left that cycle (bench scenario 3: 65 -> 72-80 MiB, dropping back after each full
 * collection). A full collection when the agent falls quiet frees both; malloc_trim(0) then returns
 * to the kernel the pages glibc keeps free in its arenas.
 */

import type { SchedulerHooks } from '../cni/scheduler.js';
import type { Logger } from '../log.js';

/**
 * Long enough that the calls of one rollout (tens to hundreds of ms apart) do not trigger a release
 * between them. A forced full collection pauses the event loop 6-130 ms here (median 22, 2 loaded
 * vCPUs): with a call every quiet second, ~2% of the agent's time at the median, ~11% at the worst.
 */
export const IDLE_RELEASE_QUIET_MS = 1000;

export interface IdleReleaseOptions {
  quietMs: number;
  /** A full V8 collection (`v8Gc()`); undefined when the agent runs without --expose-gc. */
  gc: (() => void) | undefined;
  /** Returns free malloc memory to the kernel (`mallocTrim`). */
  trim: () => void;
  log: Logger;
}

/** The `gc` that node's --expose-gc puts on the global object, if it is there. */
export function v8Gc(): (() => void) | undefined {
  const gc: unknown = Reflect.get(globalThis, 'gc');
  return typeof gc === 'function' ? () => Reflect.apply(gc, undefined, []) : undefined;
}

export class IdleRelease implements SchedulerHooks {
  readonly #options: IdleReleaseOptions;
  /** Set if and only if the scheduler is idle, the quiet period has not elapsed yet, and not closed. */
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  #releases = 0;

  constructor(options: IdleReleaseOptions) {
    this.#options = options;
  }

  /** Releases done so far. */
  get releases(): number {
    return this.#releases;
  }

  busy(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  idle(): void {
    if (this.#closed) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#release(), this.#options.quietMs);
    // A pending release never keeps the process alive.
    this.#timer.unref();
  }

  close(): void {
    this.#closed = true;
    this.busy();
  }

  #release(): void {
    this.#timer = undefined;
    const { gc, trim, log } = this.#options;
    const rssBefore = process.memoryUsage.rss();
    const start = performance.now();
    gc?.();
    const collected = performance.now();
    trim();
    const trimmed = performance.now();
    this.#releases++;
    log.info('idle: memory released', {
      rssMiB: [mib(rssBefore), mib(process.memoryUsage.rss())],
      gcMs: gc ? round(collected - start) : undefined,
      trimMs: round(trimmed - collected),
    });
  }
}

const mib = (bytes: number): number => Math.round((bytes / 2 ** 20) * 10) / 10;
const round = (ms: number): number => Math.round(ms * 10) / 10;
