/**
 * Bridging mode keeps the node-local pods' L2 off the underlay (issue 15, finding 12). The node's pod
 * CIDRs are routed, not bridged: no host of the underlay has an address in them, so no ARP naming one
 * has any business on the wire. Yet the node's requests for its pods (sender: the pod gateway, with the
 * uplink's MAC), the pods' requests for each other and their announcements are broadcasts, and both
 * datapaths flood broadcasts out of the uplink too. Only pool pods' L2 belongs on the underlay.
 *
 * One netdev-family nftables chain on the uplink's egress hook drops ARP whose sender or target
 * address lies in a pod CIDR of the node, and IPv6 neighbour solicitations and advertisements whose
 * target does (not by source: a node without an underlay IPv6 address of a next hop's prefix may
 * solicit it from a pod gateway address), counted, whatever put it there: the Linux bridge forwarding
 * out of its port, OVS's kernel datapath sending on its port, or the userspace datapath's packet
 * socket (the egress hook sees those frames too). Both datapaths install it when the uplink joins and
 * remove it when it leaves. A pool pod's ARP is untouched: its addresses are the underlay's, and a
 * VLAN pool's frames leave tagged (ethertype 802.1Q). Needs Linux 5.16+ and `nft`, as the gateway's
 * ARP guard does.
 */
import { dropTable, type Nft } from '../kernel/nft.js';
import type { GatewayAddress } from './datapath.js';
import { podCidrsV4, podCidrsV6 } from './pod-cidrs.js';

export const UPLINK_ARP_TABLE = 'podwire_uplink_arp';

/**
 * The nft script that (re)creates the chain on `uplink`, in one transaction: `v4` as CIDR text, `v6`
 * as (network, length). An ND message's target is the 16 bytes after its first 8 (`@th,64,128`, as the
 * pod guards read it); its first `length` bits are compared with the prefix's.
 */
export function uplinkArpGuardScript(
  uplink: string,
  v4: readonly string[],
  v6: ReadonlyArray<{ network: bigint; length: number }> = [],
): string {
  const rules: string[] = [];
  if (v4.length > 0) {
    const set = `{ ${v4.join(', ')} }`;
    rules.push(`    ether type arp arp saddr ip ${set} counter drop`);
    rules.push(`    ether type arp arp daddr ip ${set} counter drop`);
  }
  for (const { network, length } of v6) {
    if (length === 0) continue;
    const bits = network >> BigInt(128 - length);
    rules.push(
      `    icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } @th,64,${length} 0x${bits.toString(16)} counter drop`,
    );
  }
  return [
    ...dropTable('netdev', UPLINK_ARP_TABLE),
    `table netdev ${UPLINK_ARP_TABLE} {`,
    '  chain egress {',
    `    type filter hook egress device ${JSON.stringify(uplink)} priority 0; policy accept;`,
    '    ether type != { arp, ip6 } accept',
    ...rules,
    '  }',
    '}',
    '',
  ].join('\n');
}

/**
 * Equivalent to: `nft -f` of `uplinkArpGuardScript` for the node's pod CIDRs (from its gateways).
 * Both datapaths call it before the uplink joins. Where it cannot be installed (no `nft`, a kernel
 * before 5.16 without the netdev egress hook) bridging still works, so `warn` says so instead.
 */
export async function installUplinkArpGuard(
  nft: Nft,
  uplink: string,
  gateways: readonly GatewayAddress[],
  warn?: (message: string, fields: Record<string, unknown>) => void,
): Promise<void> {
  const v4 = podCidrsV4(gateways);
  const v6 = podCidrsV6(gateways);
  try {
    if (v4.length === 0 && v6.length === 0) await removeUplinkArpGuard(nft);
    else await nft.apply(uplinkArpGuardScript(uplink, v4, v6));
  } catch (err) {
    warn?.(
      "uplink ARP guard not installed (needs nft and a kernel with the netdev egress hook, 5.16+): the node-local pods' ARP floods onto the underlay",
      { uplink, err: String(err) },
    );
  }
}

/** Equivalent to: `nft delete table netdev podwire_uplink_arp`; nothing to do when it is not there. */
export function removeUplinkArpGuard(nft: Nft): Promise<void> {
  return nft.apply([...dropTable('netdev', UPLINK_ARP_TABLE), ''].join('\n'));
}
