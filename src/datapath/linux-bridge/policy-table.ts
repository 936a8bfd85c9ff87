/**
 * NetworkPolicy on the Linux bridge (issue 28, decision 45): the fixed part, one nftables table of the
 * inet family, installed by `nft` once per start. Bridged frames between two pods reach its forward
 * hook through br_netfilter (agent/startup/bridge-netfilter.ts), as routed packets from other nodes,
 * from the gateway and to the outside do; Service traffic arrives after kube-proxy's DNAT
 * (prerouting), so the real backend is judged; what the node itself sends (output) never is.
 *
 *   forward    ct state established,related: accept (replies of allowed connections);
 *              IPv6 neighbour solicitations and advertisements: accept (the address resolution
 *              NetworkPolicy does not govern, as ARP is not IP; the pod guards police it);
 *              IPv4 -> egress4, ingress4; IPv6 -> egress6, ingress6
 *   egressF    (src, dst, l4proto, dport) in eg_portsF: return; (src, dst) in eg_anyF: return;
 *              src in eg_isoF: drop (counted per pod)
 *   ingressF   the same with dst and src swapped, on the in_* sets
 *
 * Every policy change is elements of these sets (policy-elements.ts), added and removed in one
 * netlink batch (nft-policy-backend.ts). The *_ports and *_any sets hold concatenated intervals
 * (`pod ip . peer range . l4proto . port range`, `pod ip . peer range`), so a packet costs three
 * lookups per direction whatever the number of rules; every element has its own counter.
 */
import { NFPROTO_INET } from '../../kernel/netlink/uapi/nfnetlink.js';
import { dropTable } from '../../kernel/nft.js';

export const POLICY_TABLE = 'podwire_policy';
export const POLICY_FAMILY = NFPROTO_INET;

export type PolicyDirection = 'ingress' | 'egress';

const PREFIX: Record<PolicyDirection, string> = { ingress: 'in', egress: 'eg' };

/** The three sets of a direction and family. */
export interface PolicySets {
  /** `pod ip . peer . l4proto . port`: an allowed peer range and port range of one protocol. */
  ports: string;
  /** `pod ip . peer`: an allowed peer range, every protocol and port (ICMP has no port). */
  any: string;
  /** `pod ip`: isolated for the direction; what no element above allows is dropped. */
  iso: string;
}

export function policySets(direction: PolicyDirection, family: 4 | 6): PolicySets {
  const p = PREFIX[direction];
  return { ports: `${p}_ports${family}`, any: `${p}_any${family}`, iso: `${p}_iso${family}` };
}

export const ALL_POLICY_SETS: string[] = (['ingress', 'egress'] as const).flatMap((d) =>
  ([4, 6] as const).flatMap((f) => Object.values(policySets(d, f))),
);

function setsOf(direction: PolicyDirection, family: 4 | 6): string[] {
  const addr = family === 4 ? 'ipv4_addr' : 'ipv6_addr';
  const s = policySets(direction, family);
  return [
    `  set ${s.ports} { type ${addr} . ${addr} . inet_proto . inet_service; flags interval; counter; }`,
    `  set ${s.any} { type ${addr} . ${addr}; flags interval; counter; }`,
    `  set ${s.iso} { type ${addr}; counter; }`,
  ];
}

function chainOf(direction: PolicyDirection, family: 4 | 6): string[] {
  const ip = family === 4 ? 'ip' : 'ip6';
  const [pod, peer] = direction === 'ingress' ? ['daddr', 'saddr'] : ['saddr', 'daddr'];
  const s = policySets(direction, family);
  const name = `${direction}${family}`;
  return [
    `add chain inet ${POLICY_TABLE} ${name}`,
    `flush chain inet ${POLICY_TABLE} ${name}`,
    `add rule inet ${POLICY_TABLE} ${name} ${ip} ${pod} . ${ip} ${peer} . meta l4proto . th dport @${s.ports} return`,
    `add rule inet ${POLICY_TABLE} ${name} ${ip} ${pod} . ${ip} ${peer} @${s.any} return`,
    `add rule inet ${POLICY_TABLE} ${name} ${ip} ${pod} @${s.iso} drop`,
  ];
}

/** The rule that passes replies of allowed connections before any set is looked up. */
export const ESTABLISHED_ACCEPT = 'ct state established,related accept';

/**
 * The table, its sets and chains: created when missing, adopted when there (the sets keep their
 * elements, so policy stays in force across an agent restart; the chains are rewritten in the same
 * transaction).
 */
export function policyTableScript(): string {
  const t = `inet ${POLICY_TABLE}`;
  return [
    `table ${t} {`,
    ...setsOf('ingress', 4),
    ...setsOf('ingress', 6),
    ...setsOf('egress', 4),
    ...setsOf('egress', 6),
    '}',
    ...chainOf('egress', 4),
    ...chainOf('ingress', 4),
    ...chainOf('egress', 6),
    ...chainOf('ingress', 6),
    `add chain ${t} forward { type filter hook forward priority filter; policy accept; }`,
    `flush chain ${t} forward`,
    `add rule ${t} forward ${ESTABLISHED_ACCEPT}`,
    `add rule ${t} forward icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } accept`,
    `add rule ${t} forward meta nfproto ipv4 jump egress4`,
    `add rule ${t} forward meta nfproto ipv4 jump ingress4`,
    `add rule ${t} forward meta nfproto ipv6 jump egress6`,
    `add rule ${t} forward meta nfproto ipv6 jump ingress6`,
    '',
  ].join('\n');
}

/** Drops the table, whether or not it is there. */
export function policyDropScript(): string {
  return `${dropTable('inet', POLICY_TABLE).join('\n')}\n`;
}
