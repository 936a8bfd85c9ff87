/**
 * A Datapath that forwards every call to a real one and fails the calls a FaultPlan names (the
 * fault-injecting seam fake of test/agent/add-rollback.test.ts). Op names: "datapath.METHOD".
 */
import type { Datapath, DatapathStatus, PodPort, UplinkPort } from '../../src/datapath/datapath.js';
import type { PolicyBackend } from '../../src/datapath/policy-backend.js';
import type { FaultPlan } from '../agent/fault/fault-plan.js';

export class FaultyDatapath implements Datapath {
  readonly #inner: Datapath;
  readonly #plan: FaultPlan;

  /** Only when the real datapath counts drops. */
  readonly dropCounters?: () => Promise<Array<{ guard: string; packets: number }>>;
  /** Only when the real datapath opens ports ahead (OVS); synchronous, so "before" and "after" only. */
  readonly openPort?: (port: PodPort) => void;
  /** Only when the real datapath has one: its policy backend, with "policy.apply" through the plan. */
  readonly policyBackend?: () => PolicyBackend;

  constructor(inner: Datapath, plan: FaultPlan) {
    this.#inner = inner;
    this.#plan = plan;
    const counters = inner.dropCounters?.bind(inner);
    if (counters) this.dropCounters = () => this.#call('dropCounters', counters);
    const openPort = inner.openPort?.bind(inner);
    if (openPort)
      this.openPort = (port) => plan.wrapSync('datapath.openPort', 'ERR_DATAPATH', () => openPort(port));
    const policyBackend = inner.policyBackend?.bind(inner);
    if (policyBackend) {
      let wrapped: PolicyBackend | undefined;
      this.policyBackend = () => {
        if (wrapped) return wrapped;
        const real = policyBackend();
        wrapped = {
          start: () => real.start(),
          apply: (pods) => plan.wrap('policy.apply', 'ERR_DATAPATH', () => real.apply(pods)),
          counters: () => real.counters(),
          remove: () => real.remove(),
        };
        const openDenyLog = real.openDenyLog?.bind(real);
        if (openDenyLog) wrapped.openDenyLog = openDenyLog;
        return wrapped;
      };
    }
  }

  get kind(): string {
    return this.#inner.kind;
  }
  get podTxChecksumming(): boolean {
    return this.#inner.podTxChecksumming;
  }
  get podEgressShaping(): boolean {
    return this.#inner.podEgressShaping;
  }

  #call<T>(method: string, call: () => Promise<T>): Promise<T> {
    return this.#plan.wrap(`datapath.${method}`, 'ERR_DATAPATH', call);
  }

  start(): Promise<void> {
    return this.#call('start', () => this.#inner.start());
  }
  attachPort(port: PodPort): Promise<void> {
    return this.#call('attachPort', () => this.#inner.attachPort(port));
  }
  isolatePort(hostIfname: string): Promise<void> {
    return this.#call('isolatePort', () => this.#inner.isolatePort(hostIfname));
  }
  detachPort(hostIfname: string): Promise<void> {
    return this.#call('detachPort', () => this.#inner.detachPort(hostIfname));
  }
  checkPort(hostIfname: string): Promise<void> {
    return this.#call('checkPort', () => this.#inner.checkPort(hostIfname));
  }
  ports(): Promise<string[]> {
    return this.#call('ports', () => this.#inner.ports());
  }
  attachUplink(uplink: UplinkPort): Promise<void> {
    return this.#call('attachUplink', () => this.#inner.attachUplink(uplink));
  }
  detachUplink(uplink: { ifname: string; index: number; targetMac: string }): Promise<void> {
    return this.#call('detachUplink', () => this.#inner.detachUplink(uplink));
  }
  status(): DatapathStatus {
    return this.#inner.status();
  }
  stop(): Promise<void> {
    return this.#inner.stop();
  }
}
