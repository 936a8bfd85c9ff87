/**
 * Which seam call fails. In the test's own process, `set` says; for an agent running in another
 * process (its node namespace), a file the test writes before each CNI call says. The file holds
 * `{"id": "...", "op": "datapath.attachPort", "nth": 1, "when": "before" | "after"}` (or a list of
 * such, one id: several faults in one call, e.g. a step and then its undo) or is absent (no fault). `before`: the call fails without reaching the real object; `after`: the real call
 * completes, then the wrapper fails (the step happened, its caller hears an error).
 */
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { PodwireError } from '../../../src/base/errors.js';

/**
 * `hold` / `hold-after`: the call waits (before it reaches the real object, or after it took effect)
 * until the plan no longer names this op: a gate that keeps a call in flight at a chosen step.
 */
export type FaultWhen = 'before' | 'after' | 'hold' | 'hold-after';

export interface Fault {
  /** A new id restarts the call count. */
  id: string;
  /** "datapath.attachPort", "store.claim", ... */
  op: string;
  /** Which call of `op` under this id fails, from 1. */
  nth: number;
  when: FaultWhen;
}

export const INJECTED = 'injected fault';

export class FaultPlan {
  readonly #path: string | undefined;
  readonly #counts = new Map<string, number>();
  #faults: Fault[] = [];

  /** With `path`, the fault is read from that file at each call; without, `set` gives it. */
  constructor(path?: string) {
    this.#path = path;
  }

  /** The next calls run under `fault` (undefined: none). Only for a plan without a file. */
  set(fault: Fault | Fault[] | undefined): void {
    this.#faults = fault === undefined ? [] : [fault].flat();
  }

  #current(): Fault[] {
    if (this.#path === undefined) return this.#faults;
    let text: string;
    try {
      text = readFileSync(this.#path, 'utf8');
    } catch {
      return [];
    }
    return text.trim() === '' ? [] : [JSON.parse(text) as Fault | Fault[]].flat();
  }

  /** Counts one call of `op`; says when (if at all) this call must fail. */
  enter(op: string): FaultWhen | undefined {
    const faults = this.#current().filter((f) => f.op === op);
    const id = faults[0]?.id;
    if (id === undefined) return undefined;
    const key = `${id}\0${op}`;
    const n = (this.#counts.get(key) ?? 0) + 1;
    this.#counts.set(key, n);
    return faults.find((f) => f.nth === n)?.when;
  }

  /** Runs `call` through the plan: fails before it, after it, holds it, or not at all. */
  async wrap<T>(op: string, code: 'ERR_DATAPATH' | 'ERR_STORE', call: () => Promise<T>): Promise<T> {
    const when = this.enter(op);
    if (when === 'before') throw new PodwireError(code, `${INJECTED}: ${op} (before)`);
    if (when === 'hold') await this.#released(op);
    const out = await call();
    if (when === 'after') throw new PodwireError(code, `${INJECTED}: ${op} (after it took effect)`);
    if (when === 'hold-after') await this.#released(op);
    return out;
  }

  /** `wrap` for a synchronous call: fails before it or after it (a hold cannot apply). */
  wrapSync<T>(op: string, code: 'ERR_DATAPATH' | 'ERR_STORE', call: () => T): T {
    const when = this.enter(op);
    if (when === 'before') throw new PodwireError(code, `${INJECTED}: ${op} (before)`);
    const out = call();
    if (when === 'after') throw new PodwireError(code, `${INJECTED}: ${op} (after it took effect)`);
    return out;
  }

  /** Resolves once the plan no longer holds `op` (the test rewrote or removed the fault). */
  async #released(op: string): Promise<void> {
    while (this.#current().some((f) => f.op === op && (f.when === 'hold' || f.when === 'hold-after'))) {
      await sleep(20);
    }
  }
}
