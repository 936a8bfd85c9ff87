/**
 * A router on one VLAN of the underlay, for pool pods of that VLAN to reach beyond it: an underlay
 * host (its untagged `eth0` on the underlay subnet) that also has `vNNN`, an access port of VLAN NNN
 * holding the pool's gateway address, and forwards between the two. The kernels of these machines
 * have no 802.1Q devices, so the VLAN side is an Open vSwitch of the host's own (NORMAL switching, on
 * the OVS tests' datapath type, bed/ovs.ts) whose trunk port is a second veth to the underlay bridge.
 * `stop` removes it all.
 */
import { must } from './exec.js';
import { OVS_DATAPATH, OvsInstance } from './ovs.js';
import { txChecksumOff, UNDERLAY_BRIDGE, type Underlay, type UnderlayNode } from './underlay.js';

export class VlanRouter {
  readonly vlan: number;
  readonly host: UnderlayNode;
  readonly #underlay: Underlay;
  readonly #trunk: string;
  #ovs: OvsInstance | undefined;

  private constructor(underlay: Underlay, host: UnderlayNode, vlan: number) {
    this.#underlay = underlay;
    this.host = host;
    this.vlan = vlan;
    this.#trunk = `ulv${vlan}`;
  }

  /** Gives `host` the address `gatewayCidr` (e.g. 10.100.0.1/24) on VLAN `vlan`, and forwarding. */
  static async start(
    underlay: Underlay,
    host: UnderlayNode,
    vlan: number,
    gatewayCidr: string,
  ): Promise<VlanRouter> {
    const r = new VlanRouter(underlay, host, vlan);
    try {
      await r.#start(gatewayCidr);
      return r;
    } catch (err) {
      await r.stop();
      throw err;
    }
  }

  async #start(gatewayCidr: string): Promise<void> {
    const { ns } = this.host;
    const u = this.#underlay.ns;
    await must('ip', [
      '-n',
      u,
      'link',
      'add',
      this.#trunk,
      'type',
      'veth',
      'peer',
      'name',
      'trunk0',
      'netns',
      ns,
    ]);
    await must('ip', ['-n', u, 'link', 'set', this.#trunk, 'master', UNDERLAY_BRIDGE, 'up']);
    await must('ip', ['-n', ns, 'link', 'set', 'trunk0', 'up']);
    txChecksumOff(u, this.#trunk);
    txChecksumOff(ns, 'trunk0');
    this.#ovs = await OvsInstance.start(ns);
    const port = `v${this.vlan}`;
    await this.#ovs.vsctl(
      'add-br',
      'br-vlan',
      '--',
      'set',
      'Bridge',
      'br-vlan',
      `datapath_type=${OVS_DATAPATH}`,
      '--',
      'add-port',
      'br-vlan',
      'trunk0',
      '--',
      'add-port',
      'br-vlan',
      port,
      `tag=${this.vlan}`,
      '--',
      'set',
      'Interface',
      port,
      'type=internal',
    );
    await must('ip', ['-n', ns, 'addr', 'add', gatewayCidr, 'dev', port]);
    await must('ip', ['-n', ns, 'link', 'set', port, 'up']);
    await must('ip', ['netns', 'exec', ns, 'sysctl', '-qw', 'net.ipv4.ip_forward=1']);
  }

  async stop(): Promise<void> {
    await this.#ovs?.stop();
    this.#ovs = undefined;
    await must('ip', ['-n', this.#underlay.ns, 'link', 'del', this.#trunk]).catch(() => undefined);
  }
}
