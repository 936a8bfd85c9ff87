/**
 * Undo steps of a transaction (a CNI ADD): pushed as each step succeeds, run in reverse order when a
 * later step fails. A failing undo step does not stop the others; every failure is reported.
 */
import type { Logger } from './log.js';

export class Rollback {
  readonly #steps: Array<{ what: string; undo: () => unknown }> = [];

  push(what: string, undo: () => unknown): void {
    this.#steps.push({ what, undo });
  }

  /** Forgets every step: the transaction succeeded. */
  commit(): void {
    this.#steps.length = 0;
  }

  /** Runs every undo step in reverse order; returns the failures after logging each. */
  async run(log: Logger): Promise<Error[]> {
    const failures: Error[] = [];
    while (this.#steps.length > 0) {
      const step = this.#steps.pop();
      if (!step) break;
      try {
        await step.undo();
      } catch (err) {
        const e = err instanceof Error ? err : new Error(String(err));
        failures.push(e);
        log.error('rollback step failed', { step: step.what, err: e.message });
      }
    }
    return failures;
  }
}
