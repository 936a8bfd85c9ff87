/** Durations of the steps of one CNI call, for its log line: where the time of a slow call went. */
export class StepTimer {
  readonly #steps: Record<string, number> = {};
  #last = performance.now();

  /** Records the time since the previous mark (or creation) under `step`. */
  mark(step: string): void {
    const now = performance.now();
    this.#steps[step] = Math.round((now - this.#last) * 100) / 100;
    this.#last = now;
  }

  get steps(): Readonly<Record<string, number>> {
    return this.#steps;
  }
}
