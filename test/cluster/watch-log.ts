/** Test helpers: a background consumer of a node watch, and error/timing assertions. */

import { PodwireError } from '../../src/base/errors.js';
import type { ClusterStore, NodeEvent, NodeList } from '../../src/cluster/store.js';

/** Consumes `store.watchNodes` in the background and records every event. */
export class EventLog {
  readonly events: NodeEvent[] = [];
  /** Settles when the watch ends: resolves on a normal end, rejects with the watch's error. */
  readonly done: Promise<void>;
  readonly #ctl = new AbortController();
  #changed: () => void = () => undefined;

  constructor(store: ClusterStore, since?: NodeList) {
    const iterable = store.watchNodes({ signal: this.#ctl.signal, ...(since ? { since } : {}) });
    this.done = (async () => {
      try {
        for await (const e of iterable) {
          this.events.push(e);
          this.#changed();
        }
      } finally {
        this.#changed();
      }
    })();
    // Observed by waitFor/stop; this keeps an early failure from being reported as unhandled.
    this.done.catch(() => undefined);
  }

  /** Resolves with the events once `pred` holds; rejects after `timeoutMs` listing what arrived. */
  async waitFor(pred: (events: NodeEvent[]) => boolean, timeoutMs = 5000): Promise<NodeEvent[]> {
    const deadline = Date.now() + timeoutMs;
    let ended = false;
    void this.done.finally(() => {
      ended = true;
    });
    while (!pred(this.events)) {
      const left = deadline - Date.now();
      if (left <= 0 || ended) {
        if (ended) await this.done;
        throw new Error(`watch: condition not met within ${timeoutMs} ms; events: ${describe(this.events)}`);
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 100));
        this.#changed = () => {
          clearTimeout(t);
          resolve();
        };
      });
    }
    return [...this.events];
  }

  /** Aborts the watch and waits for it to end. */
  async stop(): Promise<void> {
    this.#ctl.abort();
    await this.done;
  }
}

export function describe(events: NodeEvent[]): string {
  return events.map((e) => `${e.type} ${e.node.name}@${e.revision}`).join(', ') || '(none)';
}

/** An assert.rejects/throws validator: a PodwireError with `code` whose message matches `re`. */
export function isCode(code: string, re?: RegExp): (err: unknown) => boolean {
  return (err) => {
    if (!(err instanceof PodwireError) || err.code !== code || (re !== undefined && !re.test(err.message))) {
      throw new Error(
        `expected ${code} matching ${re}, got: ${err instanceof Error ? `${(err as PodwireError).code} ${err.message}` : String(err)}`,
      );
    }
    return true;
  };
}

/** Resolves with `p`'s value, or rejects naming `what` when it takes longer than `ms`. */
export async function within<T>(ms: number, p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
