/**
 * The Linux bridge's pod guards: what a pod may send into the bridge, with the OVS pipeline's
 * semantics and guard names (ovs/pipeline.ts tables 0, 10, 30, 40; decision 7; decision 17).
 *
 * The rules live in one nftables table of the bridge family, hooked at prerouting: every frame a
 * bridge port receives meets them before the bridge forwards it or hands it to the node. They are
 * installed by `nft` once per agent start (`podGuardScript`), and look up sets keyed by the input
 * interface's name; a pod is a handful of set elements (`podGuardKeys`), added and removed over
 * NETLINK_NETFILTER in one transaction (kernel/netlink/nf-tables.ts), so ADD and DEL spawn nothing.
 *
 *   prerouting   iifname in pod_ports -> guard (other ports, e.g. the uplink, are not ours to guard)
 *   forward      bridging mode: a frame between the uplink and a plain pod, either way: drop
 *                (L2_FORWARDING), unless addressed to the node (then with the node's MAC as
 *                source); only pool pods (in underlay_pods) share the underlay's L2
 *   guard        802.1Q/802.1ad tag: drop (CLASSIFIER); ARP -> arp_guard; IPv4 -> ip4_guard;
 *                IPv6 -> ip6_guard; any other ethertype: drop (CLASSIFIER)
 *   arp_guard    a probe (sender IP 0.0.0.0) whose target is not an own IPv4: drop (ARP_SPOOF_GUARD);
 *                (iifname, ether src, ARP sender MAC, sender IP = own IPv4 or 0.0.0.0): accept;
 *                else drop (ARP_SPOOF_GUARD)
 *   ip4_guard    DHCP to a client (UDP to 68, any source port): drop (CLASSIFIER); (iifname, ether
 *                src, IPv4 src): accept; else drop (IP_SPOOF_GUARD)
 *   ip6_guard    RS, RA, redirect, DHCPv6 to a client (UDP to 546, any source port): drop (CLASSIFIER);
 *                NA -> na_guard, NS -> ns_guard, then (iifname, ether src, IPv6 src = own address or
 *                EUI-64 link-local; `::` for ICMPv6 only): accept; else drop (IP_SPOOF_GUARD)
 *   na_guard     target = own address or link-local, with own MAC as TLL option or no option: on to
 *                the source check; else drop (ND_GUARD)
 *   ns_guard     from :: (DAD, whatever its options) with own address or link-local as target, no
 *                option, or own MAC as SLL option: on to the source check; else drop (ND_GUARD)
 *
 * An ND message whose first option is not the link-layer address is dropped (OVS would find the
 * option further on); the kernel always puts it first.
 */
import { isIPv4 } from 'node:net';
import { canonicalIp, parseIpBytes } from '../../base/ip.js';
import { eui64LinkLocal, parseMac } from '../../base/mac.js';
import { KernelError } from '../../kernel/libc.js';
import type { NfTables, SetKeys } from '../../kernel/netlink/nf-tables.js';
import { concatKey, ifnameKey } from '../../kernel/netlink/nft-set-elem.js';
import { NFPROTO_BRIDGE } from '../../kernel/netlink/uapi/nfnetlink.js';

export const POD_GUARD_TABLE = 'podwire_pod_guard';
export const POD_GUARD_FAMILY = NFPROTO_BRIDGE;

/** The drop counters, named like the OVS tables whose priority-0 flows count the same drops. */
export const POD_GUARD_COUNTERS = [
  'CLASSIFIER',
  'ARP_SPOOF_GUARD',
  'ND_GUARD',
  'IP_SPOOF_GUARD',
  'L2_FORWARDING',
] as const;

/** Set name -> its key, as nft declares it. */
const SETS: Record<string, string> = {
  pod_ports: 'type ifname',
  pod_arp: 'type ifname . ether_addr . ether_addr . ipv4_addr',
  pod_ip4: 'type ifname . ether_addr . ipv4_addr',
  pod_ip6: 'type ifname . ether_addr . ipv6_addr',
  pod_ip6_icmp: 'type ifname . ether_addr . ipv6_addr',
  pod_nd_target: 'typeof meta iifname . ether saddr . @th,64,128',
  pod_na_tll: 'typeof meta iifname . ether saddr . @th,64,128 . @th,208,48',
  pod_ns_sll: 'typeof meta iifname . @th,208,48',
  // Pool pods: their addresses are the underlay's (pod-cidrs.ts); and the uplink, in bridging mode.
  underlay_pods: 'type ifname',
  uplink: 'type ifname',
};

/** Map name -> its key and value types: the uplink's MAC (the node's, in bridging mode). */
const MAPS: Record<string, string> = {
  uplink_mac: 'type ifname : ether_addr',
};

/** The base chains and their hooks; the others are jumped to. */
const HOOKS: Record<string, string> = {
  prerouting: 'type filter hook prerouting priority -200; policy accept;',
  forward: 'type filter hook forward priority -200; policy accept;',
};

const CHAINS: Record<string, string[]> = {
  prerouting: ['meta iifname @pod_ports jump guard'],
  // Bridging mode (pod-cidrs.ts): a plain pod is node-local, the node routes its traffic. A frame it
  // sends to an underlay host's MAC, or floods, would leave the uplink (masqueraded to the node's IP
  // with the pod's MAC), and the underlay could reach it at L2 past the node. The bridge calls this
  // hook once per output port, floods included. Frames addressed to the node itself pass (pkttype
  // host): bridge netfilter forwards a packet the node DNATs (a Service's endpoint, the reply of a
  // masqueraded connection) as a bridged frame when the new destination lies on the same bridge.
  // Such a frame leaves with the node's MAC, as a routed one would: the underlay sees no plain pod's
  // MAC (switches' port security, IP source guard), and the pod sees its peer behind the node.
  forward: [
    'meta iifname @pod_ports meta oifname @uplink meta iifname != @underlay_pods meta pkttype host ether saddr set meta oifname map @uplink_mac accept',
    'meta iifname @uplink meta oifname @pod_ports meta oifname != @underlay_pods meta pkttype host ether saddr set meta iifname map @uplink_mac accept',
    // Everything else between the uplink and a plain pod; also a frame for the node while the map
    // lacks the uplink's MAC (its lookup fails the rule above): closed, not open.
    'meta iifname @pod_ports meta oifname @uplink meta iifname != @underlay_pods counter name L2_FORWARDING drop',
    'meta iifname @uplink meta oifname @pod_ports meta oifname != @underlay_pods counter name L2_FORWARDING drop',
  ],
  guard: [
    // A pod sends untagged frames; a tag of its own would put it on a VLAN of its choosing.
    'ether type { 8021q, 8021ad } counter name CLASSIFIER drop',
    'ether type arp jump arp_guard',
    'ether type ip jump ip4_guard',
    'ether type ip6 jump ip6_guard',
    'counter name CLASSIFIER drop',
  ],
  arp_guard: [
    // A probe (RFC 5227: sender IP 0.0.0.0) names the address it asks about as target: a host that runs
    // conflict detection on that address (a DHCP client, systemd-networkd) gives it up when it hears
    // one. A pod probes only its own addresses (decision 34); the accept below checks the MACs.
    'arp saddr ip 0.0.0.0 meta iifname . ether saddr . arp daddr ip != @pod_ip4 counter name ARP_SPOOF_GUARD drop',
    'arp htype 1 arp ptype ip arp hlen 6 arp plen 4 meta iifname . ether saddr . arp saddr ether . arp saddr ip @pod_arp accept',
    'counter name ARP_SPOOF_GUARD drop',
  ],
  ip4_guard: [
    // Pods are clients: a DHCP server's message from one (an offer naming itself as router and DNS
    // server) would configure the underlay's hosts in bridging mode (decision 29). Whatever its source
    // port: clients check only the destination port (decision 34).
    'udp dport 68 counter name CLASSIFIER drop',
    'meta iifname . ether saddr . ip saddr @pod_ip4 accept',
    'counter name IP_SPOOF_GUARD drop',
  ],
  ip6_guard: [
    // Pods are hosts: a router advertisement or a redirect from one is dropped. So is a router
    // solicitation: the node, a router, would take its source link-layer option for the sender's
    // entry (ovs/pipeline.ts, table 0).
    'icmpv6 type { nd-router-solicit, nd-router-advert, nd-redirect } counter name CLASSIFIER drop',
    // A DHCPv6 server's or relay's message to a client, from any source port (decisions 29, 34).
    'udp dport 546 counter name CLASSIFIER drop',
    'icmpv6 type nd-neighbor-advert icmpv6 code 0 jump na_guard',
    'icmpv6 type nd-neighbor-solicit icmpv6 code 0 jump ns_guard',
    'meta iifname . ether saddr . ip6 saddr @pod_ip6 accept',
    // DAD and early MLD come from :: (ICMPv6 only).
    'meta l4proto ipv6-icmp meta iifname . ether saddr . ip6 saddr @pod_ip6_icmp accept',
    'counter name IP_SPOOF_GUARD drop',
  ],
  // ICMPv6 payload offsets (@th, bits): target at 64 (16 bytes), first option at 192: type, length
  // (in 8-byte units), link-layer address at 208. An NA or NS without options is 24 bytes long.
  na_guard: [
    'ip6 length 24 meta iifname . ether saddr . @th,64,128 @pod_nd_target return',
    '@th,192,16 0x0201 meta iifname . ether saddr . @th,64,128 . @th,208,48 @pod_na_tll return',
    'counter name ND_GUARD drop',
  ],
  ns_guard: [
    // Duplicate address detection: from ::, never with a link-layer option (RFC 4862), but Linux adds a
    // nonce option (RFC 7527) to every DAD probe; the source check after this still wants own MAC.
    // Its target must be the pod's own: a probe for a neighbour's tentative address takes it away.
    'ip6 saddr :: meta iifname . ether saddr . @th,64,128 @pod_nd_target return',
    'ip6 saddr :: counter name ND_GUARD drop',
    'ip6 length 24 return',
    '@th,192,16 0x0101 meta iifname . @th,208,48 @pod_ns_sll return',
    'counter name ND_GUARD drop',
  ],
};

/**
 * The nft script that creates the guard's table, or brings an existing one's rules up to date, in one
 * transaction. Sets and counters are only added when missing: the elements of running pods stay, and
 * so do the counts; the rules are flushed and written again in the same transaction, so no frame
 * passes unguarded meanwhile.
 */
export function podGuardScript(): string {
  const T = `bridge ${POD_GUARD_TABLE}`;
  const lines = [`table ${T} {`];
  for (const c of POD_GUARD_COUNTERS) lines.push(`  counter ${c} { }`);
  for (const [name, key] of Object.entries(SETS)) lines.push(`  set ${name} { ${key}; }`);
  for (const [name, key] of Object.entries(MAPS)) lines.push(`  map ${name} { ${key}; }`);
  for (const chain of Object.keys(CHAINS)) lines.push(`  chain ${chain} { ${HOOKS[chain] ?? ''} }`);
  lines.push('}');
  for (const chain of Object.keys(CHAINS)) lines.push(`flush chain ${T} ${chain}`);
  for (const [chain, rules] of Object.entries(CHAINS)) {
    for (const r of rules) lines.push(`add rule ${T} ${chain} ${r}`);
  }
  return `${lines.join('\n')}\n`;
}

/** What a pod may be, as its guard records it. */
export interface PodIdentity {
  hostIfname: string;
  mac: string;
  /** The pod's addresses, without prefix length. */
  ips: string[];
  /** A pool pod (pod-cidrs.ts): in bridging mode it shares the underlay's L2. */
  underlay?: boolean;
}

const ZERO_V4 = parseIpBytes('0.0.0.0').bytes;
const ZERO_V6 = parseIpBytes('::').bytes;

/** The elements of one pod, per set. */
export function podGuardKeys(p: PodIdentity): SetKeys[] {
  const name = ifnameKey(p.hostIfname);
  const mac = parseMac(p.mac.toLowerCase());
  const v4 = p.ips.filter((ip) => isIPv4(ip)).map((ip) => parseIpBytes(ip).bytes);
  const v6 = p.ips.filter((ip) => !isIPv4(ip)).map((ip) => parseIpBytes(canonicalIp(ip)).bytes);
  const groups: SetKeys[] = [
    { set: 'pod_ports', keys: [name] },
    { set: 'pod_arp', keys: [...v4, ZERO_V4].map((ip) => concatKey([name, mac, mac, ip])) },
    { set: 'pod_ip4', keys: v4.map((ip) => concatKey([name, mac, ip])) },
  ];
  if (p.underlay) groups.push({ set: 'underlay_pods', keys: [name] });
  if (v6.length > 0) {
    const own = [...v6, parseIpBytes(eui64LinkLocal(p.mac.toLowerCase())).bytes];
    groups.push(
      { set: 'pod_ip6', keys: own.map((ip) => concatKey([name, mac, ip])) },
      { set: 'pod_ip6_icmp', keys: [concatKey([name, mac, ZERO_V6])] },
      { set: 'pod_nd_target', keys: own.map((ip) => concatKey([name, mac, ip])) },
      { set: 'pod_na_tll', keys: own.map((ip) => concatKey([name, mac, ip, mac])) },
      { set: 'pod_ns_sll', keys: [concatKey([name, mac])] },
    );
  }
  return groups;
}

const IFNAMSIZ = 16;
const decoder = new TextDecoder();

function nameOf(key: Uint8Array): string {
  const end = key.subarray(0, IFNAMSIZ).indexOf(0);
  return decoder.decode(key.subarray(0, end < 0 ? IFNAMSIZ : end));
}

function hex(b: Uint8Array): string {
  return [...b].map((x) => x.toString(16).padStart(2, '0')).join(':');
}

/** Formats IPv4/IPv6 bytes. */
function ipText(b: Uint8Array): string {
  if (b.length === 4) return b.join('.');
  const words: string[] = [];
  for (let i = 0; i < 16; i += 2) words.push((((b[i] ?? 0) << 8) | (b[i + 1] ?? 0)).toString(16));
  return canonicalIp(words.join(':'));
}

/**
 * The pods the kernel's sets hold, read back: what a restarted agent recorded before (the MAC and
 * addresses of each guarded port), from the address sets (link-local and `::` aside).
 */
export function readPodIdentities(nf: NfTables): Map<string, PodIdentity> {
  const out = new Map<string, PodIdentity>();
  const get = (name: string, mac: string) => {
    let p = out.get(name);
    if (!p) {
      p = { hostIfname: name, mac, ips: [] };
      out.set(name, p);
    }
    return p;
  };
  for (const k of nf.listElements(POD_GUARD_FAMILY, POD_GUARD_TABLE, 'pod_ports')) get(nameOf(k), '');
  for (const k of nf.listElements(POD_GUARD_FAMILY, POD_GUARD_TABLE, 'underlay_pods'))
    get(nameOf(k), '').underlay = true;
  for (const k of nf.listElements(POD_GUARD_FAMILY, POD_GUARD_TABLE, 'pod_ip4')) {
    const p = get(nameOf(k), hex(k.subarray(16, 22)));
    p.mac = hex(k.subarray(16, 22));
    p.ips.push(ipText(k.subarray(24, 28)));
  }
  for (const k of nf.listElements(POD_GUARD_FAMILY, POD_GUARD_TABLE, 'pod_ip6')) {
    const ip = ipText(k.subarray(24, 40));
    const p = get(nameOf(k), hex(k.subarray(16, 22)));
    p.mac = hex(k.subarray(16, 22));
    if (!ip.startsWith('fe80:')) p.ips.push(ip);
  }
  return out;
}

const ENOENT = 2;

/** Installs a pod's elements (one transaction); elements already there are no error. */
export function addPodGuard(nf: NfTables, p: PodIdentity): void {
  nf.addElements(POD_GUARD_FAMILY, POD_GUARD_TABLE, podGuardKeys(p));
}

/**
 * Removes a pod's elements. One transaction when they are all there; otherwise (some removed by hand,
 * or a half-done earlier removal) each set on its own, ignoring what is already gone.
 */
export function removePodGuard(nf: NfTables, p: PodIdentity): void {
  deleteKeys(nf, podGuardKeys(p));
}

/**
 * A pod guarded anew as `next` (reconcile re-adds it with other addresses, a MAC or pool status):
 * its new elements first, then those of `old` that `next` lacks, so the port is never unguarded in
 * between (two transactions; between them the port may send as either).
 */
export function replacePodGuard(nf: NfTables, old: PodIdentity, next: PodIdentity): void {
  const wanted = podGuardKeys(next);
  nf.addElements(POD_GUARD_FAMILY, POD_GUARD_TABLE, wanted);
  const keep = new Set(wanted.flatMap((g) => g.keys.map((k) => `${g.set} ${hex(k)}`)));
  const gone = podGuardKeys(old)
    .map((g) => ({ set: g.set, keys: g.keys.filter((k) => !keep.has(`${g.set} ${hex(k)}`)) }))
    .filter((g) => g.keys.length > 0);
  if (gone.length > 0) deleteKeys(nf, gone);
}

function deleteKeys(nf: NfTables, groups: SetKeys[]): void {
  try {
    nf.deleteElements(POD_GUARD_FAMILY, POD_GUARD_TABLE, groups);
    return;
  } catch {
    // fall through: one element at a time
  }
  for (const g of groups) {
    for (const key of g.keys) {
      try {
        nf.deleteElements(POD_GUARD_FAMILY, POD_GUARD_TABLE, [{ set: g.set, keys: [key] }]);
      } catch (err) {
        // Already gone (ENOENT), or the table itself is. Anything else would leave an identity in the
        // guards that no record knows of: the caller hears of it.
        if (!(err instanceof KernelError && err.errno === ENOENT)) throw err;
      }
    }
  }
}

/** The first set that lacks one of the pod's elements, or undefined when all are there. */
export function missingPodGuard(nf: NfTables, p: PodIdentity): string | undefined {
  for (const g of podGuardKeys(p)) {
    try {
      nf.getElements(POD_GUARD_FAMILY, POD_GUARD_TABLE, g.set, g.keys);
    } catch {
      return g.set;
    }
  }
  return undefined;
}

/** The drops each guard counted (0 for a counter that is not there). */
export function podGuardDrops(nf: NfTables): Array<{ guard: string; packets: number }> {
  let counters: Array<{ name: string; packets: bigint }> = [];
  try {
    counters = nf.counters(POD_GUARD_FAMILY, POD_GUARD_TABLE);
  } catch {
    // the table is not there
  }
  return POD_GUARD_COUNTERS.map((guard) => ({
    guard,
    packets: Number(counters.find((c) => c.name === guard)?.packets ?? 0n),
  }));
}

/**
 * Bridging mode: the nft script that names the uplink and its MAC (the node's), replacing any other,
 * or, with `mac` undefined, forgets them.
 */
export function guardUplinkScript(ifname: string, mac: string | undefined): string {
  const T = `bridge ${POD_GUARD_TABLE}`;
  const lines = [`flush set ${T} uplink`, `flush map ${T} uplink_mac`];
  if (mac !== undefined) {
    lines.push(`add element ${T} uplink { ${JSON.stringify(ifname)} }`);
    lines.push(`add element ${T} uplink_mac { ${JSON.stringify(ifname)} : ${mac.toLowerCase()} }`);
  }
  return `${lines.join('\n')}\n`;
}
