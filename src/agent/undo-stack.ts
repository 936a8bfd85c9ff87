/**
 * The one undo mechanism of the agent: each step that changes something pushes how to undo it; on
 * failure (an ADD step that throws, a start step that fails) or at stop, `unwind` runs the undos in
 * reverse order. A failing undo does not stop the others; every failure is logged and returned.
 * `commit` forgets the steps once a transaction (an ADD) has succeeded.
 */
import type { Logger } from './log.js';

export class UndoStack {
  readonly #steps: Array<{ what: string; undo: () => unknown }> = [];

  /** `what` names the step in the log line of a failed undo ("ipam", "datapath", "control socket"). */
  push(what: string, undo: () => unknown): void {
    this.#steps.push({ what, undo });
  }

  get size(): number {
    return this.#steps.length;
  }

  /** Forgets every step: the transaction succeeded. */
  commit(): void {
    this.#steps.length = 0;
  }

  /** Runs every undo in reverse order; returns the failures after logging each. */
  async unwind(log: Logger): Promise<Error[]> {
    const failures: Error[] = [];
    while (this.#steps.length > 0) {
      const step = this.#steps.pop();
      if (!step) break;
      try {
        await step.undo();
      } catch (err) {
        const e = err instanceof Error ? err : new Error(String(err));
        failures.push(e);
        log.error('undo step failed', { step: step.what, err: e.message });
      }
    }
    return failures;
  }
}
