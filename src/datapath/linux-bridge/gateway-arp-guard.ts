/**
 * The Linux bridge's counterpart of the OVS gateway ARP guard (docs/architecture.md: I5, failure 2): ARP that the
 * node sends through the bridge must carry one of the gateway interface's own IPv4 addresses and its
 * MAC, in the Ethernet header and in the ARP sender fields; anything else is dropped, counted, before
 * it reaches any port. The kernel should never send such a frame (the bridge keeps one fixed MAC,
 * `arp_announce=1`); this makes it impossible rather than unlikely. A netdev-family nftables chain on
 * the bridge interface's egress hook sees every frame the node sends into the bridge, packet sockets'
 * included. (The bridge family's output hook would need `meta obrname`, which kernels built without
 * CONFIG_NFT_BRIDGE_META, as these machines', refuse.)
 */
import { dropTable, type Nft } from '../../kernel/nft.js';

export const GATEWAY_ARP_TABLE = 'podwire_gateway_arp';

export interface GatewayIdentity {
  bridge: string;
  /** The bridge interface's MAC (in bridging mode, the uplink's). */
  mac: string;
  /** Its IPv4 addresses: the pod gateways and, in bridging mode, the node's underlay addresses. */
  ipv4s: string[];
}

/** The nft script that (re)creates the guard for `id`, in one transaction. */
export function gatewayArpGuardScript(id: GatewayIdentity): string {
  const mac = id.mac.toLowerCase();
  const own =
    id.ipv4s.length > 0
      ? [`    arp saddr ip != { ${id.ipv4s.join(', ')} } counter drop`]
      : ['    counter drop comment "no IPv4 address of its own: no ARP"'];
  return [
    ...dropTable('netdev', GATEWAY_ARP_TABLE),
    `table netdev ${GATEWAY_ARP_TABLE} {`,
    '  chain egress {',
    `    type filter hook egress device ${JSON.stringify(id.bridge)} priority 0; policy accept;`,
    '    ether type != arp accept',
    `    ether saddr != ${mac} counter drop`,
    `    arp saddr ether != ${mac} counter drop`,
    ...own,
    '  }',
    '}',
    '',
  ].join('\n');
}

/** Installs (or replaces) the guard. */
export function installGatewayArpGuard(nft: Nft, id: GatewayIdentity): Promise<void> {
  return nft.apply(gatewayArpGuardScript(id));
}

/**
 * The packets the guard has dropped (the sum of its rule counters); 0 when it is not installed.
 * Equivalent to: `nft list table netdev podwire_gateway_arp`.
 */
export async function gatewayArpGuardDrops(nft: Nft): Promise<number> {
  let listing: string;
  try {
    listing = await nft.run(['list', 'table', 'netdev', GATEWAY_ARP_TABLE]);
  } catch {
    return 0;
  }
  return [...listing.matchAll(/counter packets (\d+) bytes \d+ drop/g)].reduce((n, m) => n + Number(m[1]), 0);
}
