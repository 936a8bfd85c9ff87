/**
 * A bed for Overlay tests: two node namespaces on a veth underlay (`ul0`: 192.168.77.1 and .2/24,
 * or fd00:77::1 and ::2/64 for an IPv6 underlay),
 * each node with one pod namespace behind a plain veth (the node holds the pod CIDR's gateway, the pod
 * the second address), and IPv4/IPv6 forwarding on in the nodes. No agent: the test drives overlays
 * itself, through a netlink socket opened in each node namespace. `cleanup` removes everything.
 */

import { ipJson, must, run } from '../../bed/exec.js';
import { NamespaceSet, netnsPath } from '../../bed/namespaces.js';
import { Rtnetlink } from '../../src/kernel/netlink/rtnetlink.js';
import { inNetns, NetnsHandle } from '../../src/kernel/netns.js';

export const UPLINK = 'ul0';

/** Underlay address `n` of the bed's family (the nodes are 1 and 2; others have no namespace). */
export function underlayAddress(family: 4 | 6, n: number): string {
  return family === 4 ? `192.168.77.${n}` : `fd00:77::${n.toString(16)}`;
}

export interface BedNode {
  name: string;
  ns: string;
  podNs: string;
  nl: Rtnetlink;
  uplinkIndex: number;
  underlayIP: string;
  podCIDRs: string[];
  /** The pod's addresses (v4, v6). */
  podIps: string[];
}

/** What a node's kernel holds for the overlay, as sorted text lines (read with iproute2). */
export interface KernelView {
  /** Routes with protocol 250: "DST via GW dev DEV [onlink]". */
  routes: string[];
  /** Permanent neighbours on `device`: "ADDR lladdr MAC". */
  neighbours: string[];
  /** FDB entries on `device` with a remote: "MAC dst IP". */
  fdb: string[];
  /** Every route that is not podwire's (link-local ones left out), both families, every table. */
  foreignRoutes: string[];
}

interface IpRoute {
  dst: string;
  gateway?: string;
  dev?: string;
  flags?: string[];
  protocol?: string;
}

export class OverlayBed {
  readonly spaces = new NamespaceSet();
  readonly #handles: NetnsHandle[] = [];
  readonly #sockets: Rtnetlink[] = [];
  nodes: BedNode[] = [];
  readonly underlay: 4 | 6;

  private constructor(underlay: 4 | 6) {
    this.underlay = underlay;
  }

  static async create(underlay: 4 | 6 = 4): Promise<OverlayBed> {
    const bed = new OverlayBed(underlay);
    try {
      await bed.#build();
    } catch (err) {
      await bed.cleanup();
      throw err;
    }
    return bed;
  }

  async #build(): Promise<void> {
    const home = NetnsHandle.current();
    this.#handles.push(home);
    const a = await this.spaces.add('ova');
    const b = await this.spaces.add('ovb');
    // No duplicate address detection on links made from here on: an address is usable at once.
    for (const ns of [a, b])
      await must('ip', ['netns', 'exec', ns, 'sysctl', '-qw', 'net.ipv6.conf.default.accept_dad=0']);
    await must('ip', ['-n', a, 'link', 'add', UPLINK, 'type', 'veth', 'peer', 'name', UPLINK, 'netns', b]);
    for (const [i, ns] of [a, b].entries()) {
      const n = i + 1;
      const podNs = await this.spaces.add(`ovp${n}`);
      await must('ip', ['netns', 'exec', podNs, 'sysctl', '-qw', 'net.ipv6.conf.default.accept_dad=0']);
      const underlayIP = underlayAddress(this.underlay, n);
      const v4 = `10.246.${n}`;
      const v6 = `fd00:246:${n}:`;
      const sh = async (...args: string[]) => must('ip', ['-n', ns, ...args]);
      const pod = async (...args: string[]) => must('ip', ['-n', podNs, ...args]);
      await sh('link', 'set', 'lo', 'up');
      if (this.underlay === 4) await sh('addr', 'add', `${underlayIP}/24`, 'dev', UPLINK);
      else await sh('addr', 'add', `${underlayIP}/64`, 'dev', UPLINK, 'nodad');
      await sh('link', 'set', UPLINK, 'up');
      await sh('link', 'add', 'pv0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', podNs);
      await sh('addr', 'add', `${v4}.1/24`, 'dev', 'pv0');
      await sh('addr', 'add', `${v6}:1/64`, 'dev', 'pv0', 'nodad');
      await sh('link', 'set', 'pv0', 'up');
      await pod('link', 'set', 'lo', 'up');
      await pod('addr', 'add', `${v4}.2/24`, 'dev', 'eth0');
      await pod('addr', 'add', `${v6}:2/64`, 'dev', 'eth0', 'nodad');
      await pod('link', 'set', 'eth0', 'up');
      await pod('route', 'add', 'default', 'via', `${v4}.1`);
      await pod('-6', 'route', 'add', 'default', 'via', `${v6}:1`);
      await must('ip', [
        'netns',
        'exec',
        ns,
        'sysctl',
        '-qw',
        'net.ipv4.ip_forward=1',
        'net.ipv6.conf.all.forwarding=1',
      ]);
      const handle = NetnsHandle.open(netnsPath(ns));
      this.#handles.push(handle);
      const nl = inNetns(handle, home, () => Rtnetlink.open());
      this.#sockets.push(nl);
      const uplinkIndex = nl.linkByName(UPLINK)?.index;
      if (uplinkIndex === undefined) throw new Error(`${UPLINK} missing in ${ns}`);
      this.nodes.push({
        name: `node-${n}`,
        ns,
        podNs,
        nl,
        uplinkIndex,
        underlayIP,
        podCIDRs: [`${v4}.0/24`, `${v6}:/64`],
        podIps: [`${v4}.2`, `${v6}:2`],
      });
    }
  }

  /** The kernel's overlay state of `node`; `device`: the device podwire's neighbours/FDB live on. */
  async view(node: BedNode, device: string): Promise<KernelView> {
    const routes: string[] = [];
    const foreignRoutes: string[] = [];
    for (const family of ['-4', '-6']) {
      for (const r of await ipJson<IpRoute[]>(node.ns, [family, 'route', 'show', 'proto', '250'])) {
        const onlink = r.flags?.includes('onlink') ? ' onlink' : '';
        routes.push(`${r.dst} via ${r.gateway} dev ${r.dev}${onlink}`);
      }
      const all = await must('ip', ['-n', node.ns, family, 'route', 'show', 'table', 'all']);
      // Link-local routes come and go with IPv6 address configuration, never by the overlay.
      for (const line of all.split('\n'))
        if (line !== '' && !/\bproto 250\b/.test(line) && !/\bfe80:/.test(line))
          foreignRoutes.push(line.trim());
    }
    const neighbours: string[] = [];
    const fdb: string[] = [];
    if ((await run('ip', ['-n', node.ns, 'link', 'show', device])).code === 0) {
      const neighs = await ipJson<Array<{ dst: string; lladdr?: string; state?: string[] }>>(node.ns, [
        'neigh',
        'show',
        'dev',
        device,
        'nud',
        'permanent',
      ]);
      for (const n of neighs) neighbours.push(`${n.dst} lladdr ${n.lladdr}`);
      const out = await must('ip', ['netns', 'exec', node.ns, 'bridge', '-j', 'fdb', 'show', 'dev', device]);
      const entries = JSON.parse(out === '' ? '[]' : out) as Array<{ mac: string; dst?: string }>;
      for (const e of entries) if (e.dst !== undefined) fdb.push(`${e.mac} dst ${e.dst}`);
    }
    return {
      routes: routes.sort(),
      neighbours: neighbours.sort(),
      fdb: fdb.sort(),
      foreignRoutes: foreignRoutes.sort(),
    };
  }

  /** Pings `to` from the pod of `from`, in that pod's namespace: true at the first of `tries` answered. */
  async ping(from: BedNode, to: string, tries = 3): Promise<boolean> {
    for (let i = 0; i < tries; i++) {
      const r = await run('ip', ['netns', 'exec', from.podNs, 'ping', '-c', '1', '-W', '1', to]);
      if (r.code === 0) return true;
    }
    return false;
  }

  async cleanup(): Promise<void> {
    for (const s of this.#sockets) s.close();
    for (const h of this.#handles) h.close();
    this.#sockets.length = 0;
    this.#handles.length = 0;
    await this.spaces.cleanup();
  }
}
