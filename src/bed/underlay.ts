/**
 * The "underlay" of a test cluster: one namespace holding a bridge, and per node a veth whose node end
 * is the node's uplink (`eth0`, with an address on the underlay subnet). Everything lives in namespaces
 * the bed made; `cleanup` removes them, pass or fail (I7).
 */
import { must } from './exec.js';
import { NamespaceSet } from './namespaces.js';

/** Test-only underlay subnet; traffic to it never leaves the bed's namespaces. */
export const UNDERLAY_PREFIX = '172.30.0';
export const UNDERLAY_BRIDGE = 'ul0';

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
    await must('ip', ['-n', this.ns, 'addr', 'add', `${UNDERLAY_PREFIX}.254/24`, 'dev', UNDERLAY_BRIDGE]);
    await must('ip', ['-n', this.ns, 'link', 'set', UNDERLAY_BRIDGE, 'up']);
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
