/**
 * The "underlay" of a test cluster: one namespace holding a bridge, and per node a veth whose node end
 * is the node's uplink (`eth0`, with an address on the underlay subnet). Everything lives in namespaces
 * the bed made; `cleanup` removes them, pass or fail (I7).
 */
import { EthtoolSocket } from '../src/kernel/ethtool.js';
import { inNetns, NetnsHandle } from '../src/kernel/netns.js';
import { must } from './exec.js';
import { NamespaceSet, NETNS_DIR } from './namespaces.js';

/** Test-only underlay subnet; traffic to it never leaves the bed's namespaces. */
export const UNDERLAY_PREFIX = '172.30.0';
export const UNDERLAY_BRIDGE = 'ul0';
/** The underlay bridge's own MAC (locally administered), set at setup and never changed. */
export const UNDERLAY_BRIDGE_MAC = '02:00:ac:1e:00:fe';

/**
 * Equivalent to: `ip netns exec NS ethtool -K IFNAME tx off`. A NIC puts frames on the wire with
 * their checksums complete; a veth hands its peer the sender's unfinished one, which a switch reading
 * the frame through a packet socket (OVS's userspace datapath on an uplink) forwards as it is and the
 * receiver then drops. The underlay's veths compute checksums, as NICs would.
 */
export function txChecksumOff(ns: string, ifname: string): void {
  using home = NetnsHandle.current();
  using target = NetnsHandle.open(`${NETNS_DIR}/${ns}`);
  using sock = inNetns(target, home, () => EthtoolSocket.open());
  sock.setTxChecksumming(ifname, false);
}

export interface UnderlayNode {
  ns: string;
  uplink: string;
  ip: string;
}

export class Underlay {
  readonly spaces = new NamespaceSet();
  ns = '';
  #next = 0;

  async setup(): Promise<this> {
    this.ns = await this.spaces.add('underlay');
    await must('ip', ['-n', this.ns, 'link', 'set', 'lo', 'up']);
    await must('ip', ['-n', this.ns, 'link', 'add', UNDERLAY_BRIDGE, 'type', 'bridge']);
    // A fixed MAC: left to itself a Linux bridge takes the lowest MAC of its ports, so it changed each
    // time a port came or went (a node, the VLAN router's trunk, a plain host), without a gratuitous
    // ARP. Every node kept the old MAC for etcd's address (this bridge's) in its neighbour cache and
    // sent its etcd requests to a MAC nobody had until the entry expired: the bridged-node etcd
    // stall, an 8 s timeout (107) right after a port left (issue 16).
    await must('ip', ['-n', this.ns, 'link', 'set', UNDERLAY_BRIDGE, 'address', UNDERLAY_BRIDGE_MAC]);
    await must('ip', ['-n', this.ns, 'addr', 'add', `${UNDERLAY_PREFIX}.254/24`, 'dev', UNDERLAY_BRIDGE]);
    await must('ip', ['-n', this.ns, 'link', 'set', UNDERLAY_BRIDGE, 'up']);
    txChecksumOff(this.ns, UNDERLAY_BRIDGE);
    return this;
  }

  /** The underlay address of the bed itself (on its bridge): where etcd listens. */
  get hostIp(): string {
    return `${UNDERLAY_PREFIX}.254`;
  }

  /** A new node namespace with uplink `eth0` at 172.30.0.(10+n)/24. */
  async addNode(role: string): Promise<UnderlayNode> {
    const n = this.#next++;
    const ns = await this.spaces.add(role);
    const ip = `${UNDERLAY_PREFIX}.${10 + n}`;
    const outer = `ulp${n}`;
    await must('ip', [
      '-n',
      this.ns,
      'link',
      'add',
      outer,
      'type',
      'veth',
      'peer',
      'name',
      'eth0',
      'netns',
      ns,
    ]);
    await must('ip', ['-n', this.ns, 'link', 'set', outer, 'master', UNDERLAY_BRIDGE, 'up']);
    await must('ip', ['-n', ns, 'addr', 'add', `${ip}/24`, 'dev', 'eth0']);
    await must('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
    await must('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    txChecksumOff(this.ns, outer);
    txChecksumOff(ns, 'eth0');
    return { ns, uplink: 'eth0', ip };
  }

  /** Removes a node's namespace (its uplink veth goes with it). */
  async removeNode(node: UnderlayNode): Promise<void> {
    await this.spaces.delete(node.ns);
  }

  async cleanup(): Promise<void> {
    await this.spaces.cleanup();
  }
}
