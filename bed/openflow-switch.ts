/**
 * A real OpenFlow switch for the native client's tests: a throwaway namespace (`pwt-PID-*`), a
 * private OVS in it (bed/ovs.ts) and one userspace bridge (datapath_type=netdev: no kernel module
 * needed) that speaks OpenFlow 1.0, 1.3 and 1.4, with one internal port. `cleanup` removes all of
 * it, pass or fail.
 */
import { must } from './exec.js';
import { NamespaceSet } from './namespaces.js';
import { OvsInstance, ovsAvailable } from './ovs.js';

export { ovsAvailable };

export class OpenflowSwitch {
  readonly bridge: string;
  /** An internal port on the bridge. */
  readonly port = 'pwtp1';
  readonly #ns = new NamespaceSet();
  #ovs: OvsInstance | undefined;

  constructor(bridge = 'pwtof0') {
    this.bridge = bridge;
  }

  get ovs(): OvsInstance {
    if (!this.#ovs) throw new Error('OpenflowSwitch not started');
    return this.#ovs;
  }

  /** `unix:DIR/BRIDGE.mgmt`. */
  get target(): string {
    return this.ovs.target(this.bridge);
  }

  async start(): Promise<void> {
    try {
      const ns = await this.#ns.add('of');
      this.#ovs = await OvsInstance.start(ns);
      await this.#ovs.vsctl(
        'add-br',
        this.bridge,
        '--',
        'set',
        'Bridge',
        this.bridge,
        'datapath_type=netdev',
        'fail_mode=secure',
        'protocols=OpenFlow10,OpenFlow13,OpenFlow14',
        '--',
        'add-port',
        this.bridge,
        this.port,
        '--',
        'set',
        'Interface',
        this.port,
        'type=internal',
      );
    } catch (err) {
      await this.cleanup();
      throw err;
    }
  }

  /** `ovs-vsctl get bridge BR datapath_id`, without quotes. */
  async datapathId(): Promise<string> {
    return (await this.ovs.vsctl('get', 'Bridge', this.bridge, 'datapath_id')).trim().replace(/"/g, '');
  }

  /** `ovs-ofctl -O VERSION CMD TARGET ARGS...`'s output. */
  ofctl(version: 'OpenFlow10' | 'OpenFlow13', cmd: string, ...args: string[]): Promise<string> {
    return must('ovs-ofctl', ['-O', version, cmd, this.target, ...args]);
  }

  /** The flows of `dump-flows` (OpenFlow 1.3), without durations and counters, sorted. */
  async flows(): Promise<string[]> {
    const out = await this.ofctl('OpenFlow13', 'dump-flows', '--no-stats');
    return out
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('OFPST_FLOW') && !l.startsWith('NXST_FLOW'))
      .sort();
  }

  async cleanup(): Promise<void> {
    await this.#ovs?.stop();
    this.#ovs = undefined;
    await this.#ns.cleanup();
  }
}
