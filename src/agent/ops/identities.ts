/**
 * Who is who on the wire, as this agent knows it: the gateway(s), the pods, this node's underlay
 * address and, in cluster mode, the peers' underlay addresses with their uplink MACs. The neighbour
 * audit (`podwire arp audit`) judges captured ARP/ND against this.
 */

import { formatIp } from '../../base/ip.js';
import { podMac } from '../../base/pod-mac.js';
import { parseCidr } from '../../ipam/cidr.js';
import { attachmentKey } from '../../ipam/store.js';
import type { AgentContext } from '../context.js';
import { gatewayInterface } from '../startup/datapath-select.js';

export interface IdentityEntry {
  ip: string;
  /** Lower case; undefined when the owner's MAC is not known (a peer that has not published it). */
  mac: string | undefined;
  /** "gateway podwire0", "pod ns/name", "node node-1 uplink eth0". */
  owner: string;
}

export interface NodeIdentities {
  node: string | undefined;
  entries: IdentityEntry[];
}

export async function nodeIdentities(ctx: AgentContext): Promise<NodeIdentities> {
  const entries: IdentityEntry[] = [];
  const gw = gatewayInterface(ctx.config);
  const gwMac = ctx.nl.linkByName(gw)?.mac?.toLowerCase();
  for (const text of ctx.config.podCIDRs) {
    const c = parseCidr(text);
    entries.push({ ip: formatIp(c.family, c.gateway), mac: gwMac, owner: `gateway ${gw}` });
  }
  const byAttachment = new Map<string, { ips: string[]; pod: string }>();
  for (const c of await ctx.ipam.list()) {
    const key = attachmentKey(c);
    // A pod the runtime named no Kubernetes pod for goes by its container ID, as in `podwire pods`.
    const row = byAttachment.get(key) ?? { ips: [], pod: c.pod ?? c.containerId };
    row.ips.push(c.ip);
    byAttachment.set(key, row);
  }
  for (const row of byAttachment.values()) {
    const mac = podMac(row.ips);
    for (const ip of row.ips) entries.push({ ip, mac, owner: `pod ${row.pod}` });
  }
  // Pool pods of every node share the underlay: their MAC follows their address too.
  const local = new Set(entries.map((e) => e.ip));
  for (const c of (await ctx.ipam.pools?.clusterClaims()) ?? []) {
    if (local.has(c.ip)) continue;
    entries.push({
      ip: c.ip,
      mac: podMac([c.ip]),
      owner: `pod ${c.owner.pod ?? c.owner.containerId} (node ${c.owner.node}, pool ${c.pool})`,
    });
  }
  const cluster = ctx.cluster;
  if (cluster) {
    const me = cluster.record;
    entries.push({ ip: me.underlayIP, mac: me.uplinkMac, owner: `node ${me.name} uplink` });
    for (const peer of cluster.peers) {
      entries.push({ ip: peer.underlayIP, mac: peer.uplinkMac, owner: `node ${peer.name} uplink` });
    }
  }
  return { node: cluster?.record.name, entries };
}
