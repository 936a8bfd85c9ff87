/**
 * Bridging mode keeps the node-local pods' L2 off the underlay (issue 15, finding 12). The node's pod
 * CIDRs are routed, not bridged: no host of the underlay has an address in them, so no ARP naming one
 * has any business on the wire. Yet the node's requests for its pods (sender: the pod gateway, with the
 * uplink's MAC), the pods' requests for each other and their announcements are broadcasts, and both
 * datapaths flood broadcasts out of the uplink too. Only pool pods' L2 belongs on the underlay.
 *
 * One netdev-family nftables chain on the uplink's egress hook drops ARP whose sender or target
 * address lies in a pod CIDR of the node, counted, whatever put it there: the Linux bridge forwarding
 * out of its port, OVS's kernel datapath sending on its port, or the userspace datapath's packet
 * socket (the egress hook sees those frames too). Both datapaths install it when the uplink joins and
 * remove it when it leaves. A pool pod's ARP is untouched: its addresses are the underlay's, and a
 * VLAN pool's frames leave tagged (ethertype 802.1Q). Needs Linux 5.16+ and `nft`, as the gateway's
 * ARP guard does.
 */
import { makePrefix, parseIpOrThrow } from '../base/ip.js';
import { dropTable, type Nft } from '../kernel/nft.js';
import type { GatewayAddress } from './datapath.js';

export const UPLINK_ARP_TABLE = 'podwire_uplink_arp';

/** The node's IPv4 pod CIDRs, from its gateway addresses (the address with its host bits cleared). */
export function podCidrsV4(gateways: readonly GatewayAddress[]): string[] {
  return gateways
    .filter((g) => g.family === 4)
    .map((g) => {
      const host = (1n << BigInt(32 - g.prefixLength)) - 1n;
      const network = parseIpOrThrow(g.address).value & (0xffffffffn ^ host);
      return makePrefix(4, network, g.prefixLength).text;
    });
}

/** The nft script that (re)creates the chain on `uplink` for `cidrs`, in one transaction. */
export function uplinkArpGuardScript(uplink: string, cidrs: readonly string[]): string {
  const set = `{ ${cidrs.join(', ')} }`;
  return [
    ...dropTable('netdev', UPLINK_ARP_TABLE),
    `table netdev ${UPLINK_ARP_TABLE} {`,
    '  chain egress {',
    `    type filter hook egress device ${JSON.stringify(uplink)} priority 0; policy accept;`,
    '    ether type != arp accept',
    `    arp saddr ip ${set} counter drop`,
    `    arp daddr ip ${set} counter drop`,
    '  }',
    '}',
    '',
  ].join('\n');
}

/**
 * Equivalent to: `nft -f` of `uplinkArpGuardScript`; with no IPv4 pod CIDR (an IPv6-only node) there
 * is nothing to drop, and any earlier chain is removed.
 */
export function installUplinkArpGuard(
  nft: Nft,
  uplink: string,
  gateways: readonly GatewayAddress[],
): Promise<void> {
  const cidrs = podCidrsV4(gateways);
  if (cidrs.length === 0) return removeUplinkArpGuard(nft);
  return nft.apply(uplinkArpGuardScript(uplink, cidrs));
}

/** Equivalent to: `nft delete table netdev podwire_uplink_arp`; nothing to do when it is not there. */
export function removeUplinkArpGuard(nft: Nft): Promise<void> {
  return nft.apply([...dropTable('netdev', UPLINK_ARP_TABLE), ''].join('\n'));
}
