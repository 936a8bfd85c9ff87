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
 *              src in eg_isoF: jump egressF_deny (counted per pod, by that one lookup)
 *   ingressF   the same with dst and src swapped, on the in_* sets
 *   DIRF_deny  under the rate limit: NFLOG to group DENY_LOG_GROUP, prefix naming the direction
 *              (the agent reads it, decision 51); then drop, every packet, logged or not
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

/**
 * Denied packets are logged through nfnetlink_log (NFLOG), not the kernel's text log: nf_log to dmesg
 * is off in a network namespace other than the initial one. One group for every chain (the prefix
 * names the direction, the message's family the IP version); 0x7077 is podwire's mark elsewhere too.
 */
export const DENY_LOG_GROUP = 0x7077;
/** Per deny chain (direction and family), in the kernel: lines per second, and the burst above it. */
export const DENY_LOG_RATE = 10;
export const DENY_LOG_BURST = 20;
/** The NFLOG copy length: the IP header and the ports, never a pod's data. */
export const DENY_LOG_SNAPLEN = 128;

/** The NFLOG prefix of a direction's deny chains. */
export function denyLogPrefix(direction: PolicyDirection): string {
  return `podwire-deny ${direction}`;
}

/** The chain an isolated pod's packets jump to when no element allowed them: log (limited), drop. */
export function denyChain(direction: PolicyDirection, family: 4 | 6): string {
  return `${direction}${family}_deny`;
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

/** The kernel's rate limit in front of the deny chains' log: past it, packets are dropped unlogged. */
const DENY_LIMIT = `limit rate ${DENY_LOG_RATE}/second burst ${DENY_LOG_BURST} packets`;

/** The deny chains' log statement: NFLOG, headers only, the prefix naming the direction. */
function denyLog(direction: PolicyDirection): string {
  return `log prefix "${denyLogPrefix(direction)}" group ${DENY_LOG_GROUP} snaplen ${DENY_LOG_SNAPLEN}`;
}

function chainOf(direction: PolicyDirection, family: 4 | 6): string[] {
  const ip = family === 4 ? 'ip' : 'ip6';
  const [pod, peer] = direction === 'ingress' ? ['daddr', 'saddr'] : ['saddr', 'daddr'];
  const s = policySets(direction, family);
  const name = `${direction}${family}`;
  const deny = denyChain(direction, family);
  return [
    // The isolation lookup is the ONE lookup of the pod's `*_iso` element (its counter counts each
    // denied packet once); the deny chain then logs under a rate limit and drops every packet.
    `add chain inet ${POLICY_TABLE} ${deny}`,
    `flush chain inet ${POLICY_TABLE} ${deny}`,
    `add rule inet ${POLICY_TABLE} ${deny} ${DENY_LIMIT} ${denyLog(direction)}`,
    `add rule inet ${POLICY_TABLE} ${deny} drop`,
    `add chain inet ${POLICY_TABLE} ${name}`,
    `flush chain inet ${POLICY_TABLE} ${name}`,
    `add rule inet ${POLICY_TABLE} ${name} ${ip} ${pod} . ${ip} ${peer} . meta l4proto . th dport @${s.ports} return`,
    `add rule inet ${POLICY_TABLE} ${name} ${ip} ${pod} . ${ip} ${peer} @${s.any} return`,
    `add rule inet ${POLICY_TABLE} ${name} ${ip} ${pod} @${s.iso} jump ${deny}`,
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
