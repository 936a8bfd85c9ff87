/**
 * Group commit of directory fsyncs. Every claim must be durable before it resolves, which takes
 * an fsync of its range directory; when twenty pods are created at once, one fsync can
 * make all twenty entries durable. A caller waits for a sync that STARTED after its change: the one
 * running when it asks may have begun before the change was made, so it waits for the next, which all
 * callers arriving meanwhile share.
 */
import { syncDir } from './fs-durable.js';

export class DirSyncer {
  readonly #path: string;
  /** The sync running now, if any. */
  #running: Promise<void> | undefined;
  /** The sync that will start when the running one ends; shared by everyone who asked meanwhile. */
  #next: Promise<void> | undefined;

  constructor(path: string) {
    this.#path = path;
  }

  /** Resolves once an fsync of the directory that began after this call has completed. */
  sync(): Promise<void> {
    if (!this.#running) return this.#start();
    if (!this.#next) {
      const after = this.#running.then(
        () => undefined,
        () => undefined,
      );
      this.#next = after.then(() => {
        this.#next = undefined;
        return this.#start();
      });
    }
    return this.#next;
  }

  #start(): Promise<void> {
    const run = syncDir(this.#path).finally(() => {
      if (this.#running === run) this.#running = undefined;
    });
    this.#running = run;
    return run;
  }
}
