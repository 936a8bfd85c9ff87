/**
 * Who may use the node's VXLAN socket: its peers only (decision 28). The kernel's VXLAN device takes
 * every UDP datagram to its port, on any of the node's addresses, and decapsulates it whatever its
 * source. A pod could send one to its node with a frame of its own making inside and so reach its
 * node, the pods of its node and the underlay with any source address; sent to a peer, the egress
 * masquerade made it look like this node's own tunnel traffic. One nftables table (inet family):
 *
 *   input    UDP to the VXLAN port addressed to anything but the node's own underlay address (the one
 *            its peers send to), or from an address that is no peer's underlay address: drop
 *   forward  UDP to the VXLAN port of a peer's underlay address: drop (a node sends its own tunnel
 *            traffic, it never forwards any: what it would forward there comes from a pod)
 *
 * The destination check is the one that holds whatever addresses a peer has: a pod's datagram to a
 * peer's second address, a VIP, or any address the forward rule does not know, leaves its node
 * masqueraded, from a peer's address, and only the receiver can tell it is not to the address its
 * peers use. The forward rule stops the plainest case at the source, even toward an older peer.
 *
 * both counted in the table's counter `forged`. The peers are a set of each family, updated from the
 * membership's peer list (`setPeers`): the first list after a start replaces the set in one
 * transaction, later ones add and delete what changed. The table outlives the agent, as the tunnel's
 * routes do, so traffic from known peers keeps flowing while the agent restarts.
 */
import { isIPv4 } from 'node:net';
import { dropTable, type Nft } from '../../kernel/nft.js';

type Warn = (msg: string, fields: Record<string, unknown>) => void;

export const VXLAN_GUARD_TABLE = 'podwire_vxlan_guard';

const T = `inet ${VXLAN_GUARD_TABLE}`;

/**
 * Creates the table, its sets and counter when missing (the peers of a running node stay), and writes
 * its rules again, in one transaction.
 */
export function vxlanGuardScript(port: number, underlayIP: string): string {
  const own = isIPv4(underlayIP) ? 'ip' : 'ip6';
  const lines = [
    `table ${T} {`,
    '  counter forged { }',
    '  set peers4 { type ipv4_addr; }',
    '  set peers6 { type ipv6_addr; }',
    '  chain input { type filter hook input priority filter; policy accept; }',
    '  chain forward { type filter hook forward priority filter; policy accept; }',
    '}',
    `flush chain ${T} input`,
    `flush chain ${T} forward`,
    `add rule ${T} input udp dport ${port} ${own} daddr != ${underlayIP} counter name forged drop`,
    `add rule ${T} input udp dport ${port} ip saddr != @peers4 counter name forged drop`,
    `add rule ${T} input udp dport ${port} ip6 saddr != @peers6 counter name forged drop`,
    `add rule ${T} forward udp dport ${port} ip daddr @peers4 counter name forged drop`,
    `add rule ${T} forward udp dport ${port} ip6 daddr @peers6 counter name forged drop`,
  ];
  return `${lines.join('\n')}\n`;
}

/** Lines that add or delete `ips` in the set of their family. */
function elementLines(verb: 'add' | 'delete', ips: Iterable<string>): string[] {
  const v4: string[] = [];
  const v6: string[] = [];
  for (const ip of ips) (isIPv4(ip) ? v4 : v6).push(ip);
  const lines: string[] = [];
  if (v4.length > 0) lines.push(`${verb} element ${T} peers4 { ${v4.join(', ')} }`);
  if (v6.length > 0) lines.push(`${verb} element ${T} peers6 { ${v6.join(', ')} }`);
  return lines;
}

export class VxlanGuard {
  readonly #nft: Nft;
  readonly #warn: Warn;
  /** The peers' addresses in the sets; undefined until the first list, or after a failed update. */
  #peers: Set<string> | undefined;
  #serial: Promise<void> = Promise.resolve();

  private constructor(nft: Nft, warn: Warn) {
    this.#nft = nft;
    this.#warn = warn;
  }

  /** Equivalent to: `nft -f` of `vxlanGuardScript(port, underlayIP)`. */
  static async start(nft: Nft, port: number, underlayIP: string, warn: Warn): Promise<VxlanGuard> {
    await nft.apply(vxlanGuardScript(port, underlayIP));
    return new VxlanGuard(nft, warn);
  }

  /**
   * The membership's peers changed: their underlay addresses become the sets. A failure is logged and
   * the next list replaces the sets whole; until then the sets stay as they were.
   */
  setPeers(peers: readonly { underlayIP: string }[]): Promise<void> {
    const run = this.#serial.then(() => this.#set(new Set(peers.map((p) => p.underlayIP))));
    this.#serial = run;
    return run;
  }

  async #set(want: Set<string>): Promise<void> {
    const have = this.#peers;
    const lines = have
      ? [
          ...elementLines(
            'add',
            [...want].filter((ip) => !have.has(ip)),
          ),
          ...elementLines(
            'delete',
            [...have].filter((ip) => !want.has(ip)),
          ),
        ]
      : [`flush set ${T} peers4`, `flush set ${T} peers6`, ...elementLines('add', want)];
    if (lines.length === 0) return;
    try {
      await this.#nft.apply(`${lines.join('\n')}\n`);
      this.#peers = want;
    } catch (err) {
      this.#peers = undefined;
      this.#warn('VXLAN guard: peer set not updated; the next peer list replaces it', { error: String(err) });
    }
  }
}

/** Removes the table (a node that no longer runs the VXLAN overlay); nothing to do when it is gone. */
export function removeVxlanGuard(nft: Nft): Promise<void> {
  return nft.apply(`${dropTable('inet', VXLAN_GUARD_TABLE).join('\n')}\n`);
}
