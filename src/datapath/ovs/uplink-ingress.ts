/**
 * OVS's userspace datapath reads a system port through a packet socket: the kernel still receives
 * every frame on that interface too. For the uplink in bridging mode that means the node answers
 * twice, once through the bridge and the gateway port, and once on the bare uplink (seen as 3
 * duplicates per ping between two bridged nodes). A netdev-family nftables chain on the uplink's
 * ingress hook drops every frame for the kernel's own stack; packet sockets (OVS) see frames before
 * that hook, so the bridge still gets all of them. The kernel datapath (`system`) needs none of
 * this: its receive handler takes the frame away from the stack.
 */
import { dropTable, type Nft } from '../../kernel/nft.js';

const TABLE = 'podwire_uplink';

/**
 * Equivalent to: `nft add table netdev podwire_uplink; nft add chain netdev podwire_uplink ingress
 * '{ type filter hook ingress device UPLINK priority 0; policy drop; }'`, replacing any previous one.
 */
export function dropKernelIngress(nft: Nft, uplink: string): Promise<void> {
  return nft.apply(
    [
      ...dropTable('netdev', TABLE),
      `table netdev ${TABLE} {`,
      '  chain ingress {',
      `    type filter hook ingress device ${JSON.stringify(uplink)} priority 0; policy drop;`,
      '  }',
      '}',
      '',
    ].join('\n'),
  );
}

/** Equivalent to: `nft delete table netdev podwire_uplink`; nothing to do when it is not there. */
export function restoreKernelIngress(nft: Nft): Promise<void> {
  return nft.apply([...dropTable('netdev', TABLE), ''].join('\n'));
}
