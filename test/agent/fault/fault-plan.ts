/**
 * Which seam call fails. In the test's own process, `set` says; for an agent running in another
 * process (its node namespace), a file the test writes before each CNI call says. The file holds
 * `{"id": "...", "op": "datapath.attachPort", "nth": 1, "when": "before" | "after"}` or is absent
 * (no fault). `before`: the call fails without reaching the real object; `after`: the real call
 * completes, then the wrapper fails (the step happened, its caller hears an error).
 */
import { readFileSync } from 'node:fs';
import { PodwireError } from '../../../src/cni/errors.js';

export type FaultWhen = 'before' | 'after';

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
  #fault: Fault | undefined;

  /** With `path`, the fault is read from that file at each call; without, `set` gives it. */
  constructor(path?: string) {
    this.#path = path;
  }

  /** The next calls run under `fault` (undefined: none). Only for a plan without a file. */
  set(fault: Fault | undefined): void {
    this.#fault = fault;
  }

  #current(): Fault | undefined {
    if (this.#path === undefined) return this.#fault;
    let text: string;
    try {
      text = readFileSync(this.#path, 'utf8');
    } catch {
      return undefined;
    }
    return text.trim() === '' ? undefined : (JSON.parse(text) as Fault);
  }

  /** Counts one call of `op`; says when (if at all) this call must fail. */
  enter(op: string): FaultWhen | undefined {
    const f = this.#current();
    if (f === undefined || f.op !== op) return undefined;
    const key = `${f.id}\0${op}`;
    const n = (this.#counts.get(key) ?? 0) + 1;
    this.#counts.set(key, n);
    return n === f.nth ? f.when : undefined;
  }

  /** Runs `call` through the plan: fails before it, after it, or not at all. */
  async wrap<T>(op: string, code: 'ERR_DATAPATH' | 'ERR_STORE', call: () => Promise<T>): Promise<T> {
    const when = this.enter(op);
    if (when === 'before') throw new PodwireError(code, `${INJECTED}: ${op} (before)`);
    const out = await call();
    if (when === 'after') throw new PodwireError(code, `${INJECTED}: ${op} (after it took effect)`);
    return out;
  }
}
