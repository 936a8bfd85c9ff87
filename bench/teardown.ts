/**
 * Everything a bench run creates (node and pod namespaces, agents, drivers, temp dirs) registers its
 * undo here. The undos run in reverse order on the normal end, on a failure, on SIGINT/SIGTERM/SIGHUP
 * and when the run's deadline passes, so that a bench leaves nothing behind (the bench's share of I7).
 */

export type Undo = () => unknown;

const EXIT_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

export class Teardown {
  readonly #undos: Array<{ what: string; undo: Undo }> = [];
  readonly #onSignal = (signal: NodeJS.Signals): void => this.#abortFrom(`signal ${signal}`);
  readonly #controller: AbortController;
  readonly #handlesSignals: boolean;
  #deadline: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;

  /**
   * `deadlineMs` bounds the whole run: when it passes, `signal` aborts. The scenarios check the
   * signal between batches and the driver kills the plugins it started, so the run ends by itself.
   * With `handleSignals`, SIGINT/SIGTERM/SIGHUP abort the same way (and no longer kill the process).
   */
  constructor(
    deadlineMs: number,
    opts: { handleSignals?: boolean } = {},
    controller = new AbortController(),
  ) {
    this.#controller = controller;
    this.#handlesSignals = opts.handleSignals ?? true;
    if (Number.isFinite(deadlineMs)) {
      this.#deadline = setTimeout(() => this.#abortFrom(`deadline of ${deadlineMs} ms passed`), deadlineMs);
      this.#deadline.unref();
    }
    if (this.#handlesSignals) for (const s of EXIT_SIGNALS) process.on(s, this.#onSignal);
  }

  /**
   * A teardown for one part of the run (a scenario): it shares this one's abort signal, and this one
   * runs it if the run stops before the part has undone its own work.
   */
  async scope<T>(body: (part: Teardown) => Promise<T>): Promise<T> {
    const part = new Teardown(Number.POSITIVE_INFINITY, { handleSignals: false }, this.#controller);
    const undo = (): Promise<void> => part.run();
    this.add('scenario', undo);
    try {
      return await body(part);
    } finally {
      await this.release(undo);
    }
  }

  /** Aborts when the run must stop (signal or deadline); its reason says why. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Throws the abort reason when the run must stop; called between batches. */
  check(): void {
    this.#controller.signal.throwIfAborted();
  }

  add(what: string, undo: Undo): void {
    this.#undos.push({ what, undo });
  }

  /** Runs one registered undo now (e.g. pods deleted between batches) and forgets it. */
  async release(undo: Undo): Promise<void> {
    const i = this.#undos.findIndex((u) => u.undo === undo);
    if (i >= 0) this.#undos.splice(i, 1);
    await undo();
  }

  /**
   * Runs every undo, last registered first; an undo that fails does not stop the others, and the
   * failures are reported together. Idempotent: a second call waits for the first.
   */
  run(): Promise<void> {
    this.#running ??= this.#runAll();
    return this.#running;
  }

  async #runAll(): Promise<void> {
    clearTimeout(this.#deadline);
    const failures: string[] = [];
    while (this.#undos.length > 0) {
      const { what, undo } = this.#undos.pop() as { what: string; undo: Undo };
      try {
        await undo();
      } catch (err) {
        failures.push(`${what}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    if (this.#handlesSignals) for (const s of EXIT_SIGNALS) process.off(s, this.#onSignal);
    if (failures.length > 0) throw new Error(`teardown left work undone:\n  ${failures.join('\n  ')}`);
  }

  #abortFrom(reason: string): void {
    if (this.#controller.signal.aborted) return;
    this.#controller.abort(new Error(`bench stopped: ${reason}`));
  }
}
