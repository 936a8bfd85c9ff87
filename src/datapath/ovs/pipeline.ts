/**
 * The OpenFlow pipeline of the OVS datapath, in the style of Antrea's: who may say what on the wire
 * (docs/architecture.md, I5). Every table ends in an explicit priority-0 flow, so what a table drops is counted
 * in that flow's n_packets.
 *
 *   0  CLASSIFIER       uplink (bridging mode) -> 50; a tag from any other port: drop; ARP -> 10; gateway
 *                       port (its own MAC) -> 50;
 *                       RS, RA, redirect, UDP to a DHCP(v6) client port (68, 546) from any port: drop;
 *                       NS/NA -> 30; IP/IPv6 -> 40; else drop
 *  10  ARP_SPOOF_GUARD  (in_port, dl_src, arp_sha, arp_spa) of each pod (own IPv4, or 0.0.0.0 with an own
 *                   IPv4 as arp_tpa: a probe) and of the gateway -> 20; else drop
 *  20  ARP_RESPONDER    who-has GATEWAY_IP from an untagged pod: answered here, back out of its port; else -> 50
 *  30  ND_GUARD         NA (in_port, nd_target = own address, nd_tll = own MAC or none), NS (from an own
 *                       address with nd_sll = own MAC; from :: without, nd_target = own address: DAD)
 *                       -> 40; else drop
 *  40  IP_SPOOF_GUARD   (in_port, dl_src, nw_src / ipv6_src = own address or own link-local) -> 45; else drop
 *  45  CT_LOOKUP        IP/IPv6: looked up in conntrack zone 65520, then -> 46; else -> 50
 *  46  GATEWAY_CT       a new connection from the gateway port: committed with ct_mark 1 -> 50; a reply
 *                       (or related packet) of such a connection from a pod: dl_dst = gateway MAC -> 50
 *  47  EGRESS_RULES     NetworkPolicy (policy-flows.ts, decision 46): empty here; the policy backend sends
 *  48  INGRESS_RULES    table 46's new and invalid packets through them (priority 230) and commits what
 *  49  POLICY_COMMIT    they allow in table 49 instead of table 46
 *  50  L2_FORWARDING    dl_dst = a pod's or the gateway's MAC -> its port; multicast -> FLOOD; else drop,
 *                       or in bridging mode: out of the uplink (the underlay's hosts), from the
 *                       gateway and pool pods only
 *
 * VLANs (pools with a VLAN, bridging mode): reg1 carries the VLAN of the frame's source, 0 for
 * untagged. A pod's guard flows set it from the pod's pool; a tagged frame from the uplink has its
 * tag moved into reg1 and popped. Forwarding matches reg1, so a pod only ever receives frames of its
 * own VLAN; frames of a VLAN leave the uplink tagged again. Untagged multicast floods (VLAN pods'
 * ports are marked no-flood); a VLAN's multicast goes to its local pods and the uplink by one flow
 * per VLAN (`vlanFloodFlow`).
 *
 * Bridging mode keeps plain pods off the underlay's L2 (decision 30): reg2 says which side of the
 * uplink a frame belongs to. 0x1 (UNDERLAY): from the gateway (the node itself) or a pool pod, whose
 * addresses are the underlay's; the uplink sets 0x3 (UNDERLAY | FROM_UPLINK). A plain pod (an address
 * of the node's pod CIDRs) leaves it 0. Only UNDERLAY frames leave through the uplink; a plain pod's
 * delivery flow takes no FROM_UPLINK frame. For multicast the uplink is marked no-flood: FLOOD from a
 * plain pod stays on the node, UNDERLAY frames add the uplink by number, and the uplink's own
 * multicast goes to the gateway and the untagged pool pods only (`underlayFloodFlow`).
 *
 * Services (kube-proxy, decision 19): the node's conntrack un-NATs a Service connection only if its
 * replies pass through the node. A connection the node has DNATed to a pod of this bridge enters
 * from the gateway port with a pod's address as source; the backend's reply is addressed to that
 * pod's MAC and would stay inside OVS. Tables 45-46 remember connections that came in from the
 * gateway (ct_mark 1, in a zone of their own) and send their replies back to the gateway, as
 * Antrea does in its kube-proxy mode. For every other connection the frame already goes where it
 * is addressed, so nothing else changes; the guards run before conntrack, so a forged packet
 * never creates a connection.
 *
 * Flows are written in the form ovs-ofctl prints them, so that `flow-text.ts` compares what is
 * installed with what should be, token for token.
 */
import { createHash } from 'node:crypto';
import { canonicalIp } from '../../base/ip.js';
import { eui64LinkLocal, ZERO_MAC } from '../../base/mac.js';

export const TABLE = {
  CLASSIFIER: 0,
  ARP_SPOOF_GUARD: 10,
  ARP_RESPONDER: 20,
  ND_GUARD: 30,
  IP_SPOOF_GUARD: 40,
  CT_LOOKUP: 45,
  GATEWAY_CT: 46,
  L2_FORWARDING: 50,
} as const;

export const TABLE_NAMES: ReadonlyMap<number, string> = new Map(
  Object.entries(TABLE).map(([name, id]) => [id, name]),
);

/** Cookie of the flows that do not belong to one pod; the high byte tells pipeline from pod flows. */
export const PIPELINE_COOKIE = 0x01n << 56n;
const POD_COOKIE_TAG = 0x02n << 56n;
const VLAN_COOKIE_TAG = 0x03n << 56n;
/** The cookie of the uplink's multicast flow (bridging mode): to the gateway and untagged pool pods. */
export const UNDERLAY_FLOOD_COOKIE = 0x04n << 56n;

/** reg2 bits (see the header): the frame's source is on the underlay's side; it came in on the uplink. */
const UNDERLAY = 0x1;
const FROM_UPLINK = 0x2;
const SET_UNDERLAY = `set_field:0x${UNDERLAY.toString(16)}->reg2,`;

/** The cookie of a VLAN's multicast flow. */
export function vlanCookie(vlan: number): bigint {
  return VLAN_COOKIE_TAG | BigInt(vlan);
}

/** reg1 = the source's VLAN, in the form ovs-ofctl prints it (0 is untagged). */
function vlanMatch(vlan: number): string {
  return vlan === 0 ? 'reg1=0' : `reg1=0x${vlan.toString(16)}`;
}

/** The guard action that records a pod's VLAN in reg1 before passing it on; nothing for untagged. */
function setVlan(vlan: number): string {
  return vlan === 0 ? '' : `set_field:0x${vlan.toString(16)}->reg1,`;
}

const MULTICAST = 'dl_dst=01:00:00:00:00:00/01:00:00:00:00:00';

/**
 * The conntrack zone of the gateway's connections: apart from the node's own (zone 0), which on the
 * kernel datapath shares the kernel's table (Antrea uses the same number).
 */
export const CT_ZONE = 65520;
/** ct_mark of a connection whose first packet came in from the gateway port. */
export const CT_MARK_FROM_GATEWAY = 0x1;
const LOW_56_BITS = (1n << 56n) - 1n;

/**
 * The cookie of every flow of one pod, derived from its host interface name (itself unique per
 * attachment), so that DEL can remove the pod's flows without any state: `del-flows cookie=C/-1`.
 */
export function podCookie(hostIfname: string): bigint {
  const digest = createHash('sha256').update(hostIfname).digest();
  return POD_COOKIE_TAG | (digest.readBigUInt64BE(0) & LOW_56_BITS);
}

export function isPodCookie(cookie: bigint): boolean {
  return cookie >> 56n === POD_COOKIE_TAG >> 56n;
}

export function cookieText(cookie: bigint): string {
  return `0x${cookie.toString(16)}`;
}

export interface GatewayFlowsInput {
  ofport: number;
  mac: string;
  /**
   * The gateway's own IPv4 addresses: the first address of the IPv4 pod CIDR and, in bridging mode,
   * the node's underlay addresses, which the gateway interface then holds with the uplink's MAC.
   */
  ipv4s: string[];
  /** Bridging mode: the OpenFlow port of the node's uplink. */
  uplinkOfport?: number;
}

export interface PodFlowsInput {
  ofport: number;
  /**
   * A pool pod (pod-cidrs.ts): its addresses are the underlay's, and in bridging mode its frames may
   * leave through the uplink. Otherwise the pod is node-local.
   */
  underlay?: boolean;
  mac: string;
  /** The pod's addresses, without prefix length. */
  ips: string[];
  cookie: bigint;
  /** The VLAN of the pod's pool; 0 or absent: untagged. */
  vlan?: number;
}

function flow(cookie: bigint, table: number, priority: number, match: string, actions: string): string {
  const m = match === '' ? '' : `,${match}`;
  return `table=${table},priority=${priority},cookie=${cookieText(cookie)}${m} actions=${actions}`;
}

const goto = (table: number) => `goto_table:${table}`;

/** The flows that exist once per bridge: table defaults, the gateway's guard, the ARP responder. */
export function pipelineFlows(gw: GatewayFlowsInput): string[] {
  const c = PIPELINE_COOKIE;
  const mac = gw.mac.toLowerCase();
  const T = TABLE;
  const out = [
    // A pod sends untagged frames: one with its own 802.1Q tag would pass the guards (they match the
    // ethertype inside the tag) and leave the uplink on the VLAN it chose. Only the uplink (above) tags.
    flow(c, T.CLASSIFIER, 255, 'vlan_tci=0x1000/0x1000', 'drop'),
    flow(c, T.CLASSIFIER, 250, 'arp', goto(T.ARP_SPOOF_GUARD)),
    flow(c, T.CLASSIFIER, 240, `in_port=${gw.ofport},dl_src=${mac}`, SET_UNDERLAY + goto(T.CT_LOOKUP)),
    // Pods are hosts: a router advertisement or a redirect from one is dropped (the gateway's pass above).
    // So is a router solicitation: the node forwards, and a router takes an RS's source link-layer
    // option for the sender's entry, even over a REACHABLE one (RFC 4861 6.2.6), so a pod could point
    // the node's traffic for it at any MAC; pods ignore router advertisements and send no RS.
    flow(c, T.CLASSIFIER, 220, 'icmp6,icmp_type=133', 'drop'),
    flow(c, T.CLASSIFIER, 220, 'icmp6,icmp_type=134', 'drop'),
    flow(c, T.CLASSIFIER, 220, 'icmp6,icmp_type=137', 'drop'),
    // Pods are clients: a DHCP or DHCPv6 server's message to a client from one would configure the
    // underlay's hosts in bridging mode (decision 29). Whatever its source port: clients check only
    // the destination port (decision 34).
    flow(c, T.CLASSIFIER, 220, 'udp,tp_dst=68', 'drop'),
    flow(c, T.CLASSIFIER, 220, 'udp6,tp_dst=546', 'drop'),
    flow(c, T.CLASSIFIER, 210, 'icmp6,icmp_type=135,icmp_code=0', goto(T.ND_GUARD)),
    flow(c, T.CLASSIFIER, 210, 'icmp6,icmp_type=136,icmp_code=0', goto(T.ND_GUARD)),
    flow(c, T.CLASSIFIER, 200, 'ip', goto(T.IP_SPOOF_GUARD)),
    flow(c, T.CLASSIFIER, 200, 'ipv6', goto(T.IP_SPOOF_GUARD)),
    flow(c, T.CLASSIFIER, 0, '', 'drop'),
    flow(c, T.ARP_SPOOF_GUARD, 0, '', 'drop'),
    flow(c, T.ARP_RESPONDER, 0, '', goto(T.L2_FORWARDING)),
    flow(c, T.ND_GUARD, 0, '', 'drop'),
    flow(c, T.IP_SPOOF_GUARD, 0, '', 'drop'),
    ...conntrackFlows(gw),
    flow(c, T.L2_FORWARDING, 200, `reg1=0,dl_dst=${mac}`, `output:${gw.ofport}`),
    flow(c, T.L2_FORWARDING, 100, `reg1=0,${MULTICAST}`, 'FLOOD'),
    flow(c, T.L2_FORWARDING, 0, '', 'drop'),
  ];
  if (gw.ipv4s.length > 0) {
    // A request from the gateway itself is not answered here (the node knows its own addresses).
    out.push(flow(c, T.ARP_RESPONDER, 210, `arp,in_port=${gw.ofport}`, goto(T.L2_FORWARDING)));
  }
  for (const ip of gw.ipv4s) {
    // The gateway port may send ARP only as itself, its own addresses with its own MAC: no other
    // address of the node ever leaves with the gateway's MAC (failure 2).
    out.push(
      flow(
        c,
        T.ARP_SPOOF_GUARD,
        200,
        `arp,in_port=${gw.ofport},dl_src=${mac},arp_spa=${ip},arp_sha=${mac}`,
        SET_UNDERLAY + goto(T.ARP_RESPONDER),
      ),
    );
  }
  const podGateway = gw.ipv4s[0];
  if (podGateway) {
    out.push(
      flow(
        c,
        T.ARP_RESPONDER,
        200,
        // Only pods of the node's own L2 (untagged) reach the gateway; a VLAN pod asks its VLAN's router.
        `arp,reg1=0,arp_tpa=${podGateway},arp_op=1`,
        [
          'move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]',
          `set_field:${mac}->eth_src`,
          'set_field:2->arp_op',
          'move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[]',
          `set_field:${mac}->arp_sha`,
          'move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[]',
          `set_field:${podGateway}->arp_spa`,
          'IN_PORT',
        ].join(','),
      ),
    );
  }
  if (gw.uplinkOfport !== undefined) out.push(...uplinkFlows(gw.uplinkOfport));
  return out;
}

/**
 * Tables 45-46 (see the header): connections from the gateway port are committed with a mark, and
 * their replies from pods go back to the gateway, where the node's conntrack un-NATs them. Only
 * untagged pods (reg1=0) can have such a connection: the gateway reaches no VLAN. ND, which
 * conntrack does not track, is never committed, so it is never redirected.
 */
function conntrackFlows(gw: GatewayFlowsInput): string[] {
  const c = PIPELINE_COOKIE;
  const T = TABLE;
  const mark = `0x${CT_MARK_FROM_GATEWAY.toString(16)}`;
  const out: string[] = [];
  for (const proto of ['ip', 'ipv6']) {
    out.push(flow(c, T.CT_LOOKUP, 200, proto, `ct(table=${T.GATEWAY_CT},zone=${CT_ZONE})`));
    out.push(
      flow(
        c,
        T.GATEWAY_CT,
        220,
        `ct_state=+new+trk,${proto},in_port=${gw.ofport}`,
        `ct(commit,zone=${CT_ZONE},exec(set_field:${mark}->ct_mark)),${goto(T.L2_FORWARDING)}`,
      ),
    );
    const toGateway = `set_field:${gw.mac.toLowerCase()}->eth_dst,${goto(T.L2_FORWARDING)}`;
    out.push(flow(c, T.GATEWAY_CT, 200, `ct_state=+rpl+trk,ct_mark=${mark},${proto},reg1=0`, toGateway));
    out.push(flow(c, T.GATEWAY_CT, 190, `ct_state=+rel+trk,ct_mark=${mark},${proto},reg1=0`, toGateway));
  }
  // The gateway's own packets of a known connection (a reply here would only loop back to it).
  out.push(flow(c, T.GATEWAY_CT, 210, `in_port=${gw.ofport}`, goto(T.L2_FORWARDING)));
  out.push(flow(c, T.CT_LOOKUP, 0, '', goto(T.L2_FORWARDING)));
  out.push(flow(c, T.GATEWAY_CT, 0, '', goto(T.L2_FORWARDING)));
  return out;
}

/**
 * Bridging mode: frames from the underlay are other hosts' business and go straight to forwarding
 * (a tagged one with its VLAN moved into reg1), marked as from the uplink, which delivers only to a
 * pod's or the gateway's MAC in the frame's VLAN (never to a plain pod's), or floods multicast; frames
 * from the gateway or a pool pod for any other MAC leave through the uplink, tagged again when their
 * source is in a VLAN; a plain pod's end in table 50's drop. OVS never outputs a frame to its own
 * ingress port, so the underlay's unknown unicast ends here. The uplink is no-flood (set by the
 * datapath): untagged multicast of the gateway and pool pods names it.
 */
function uplinkFlows(ofport: number): string[] {
  const c = PIPELINE_COOKIE;
  const T = TABLE;
  const fromUplink = `set_field:0x${(UNDERLAY | FROM_UPLINK).toString(16)}->reg2,`;
  const underlay = `reg2=0x${UNDERLAY.toString(16)}`;
  return [
    flow(
      c,
      T.CLASSIFIER,
      265,
      `in_port=${ofport},vlan_tci=0x1000/0x1000`,
      `move:NXM_OF_VLAN_TCI[0..11]->NXM_NX_REG1[0..11],pop_vlan,${fromUplink}${goto(T.L2_FORWARDING)}`,
    ),
    flow(c, T.CLASSIFIER, 260, `in_port=${ofport}`, fromUplink + goto(T.L2_FORWARDING)),
    flow(c, T.L2_FORWARDING, 105, `reg1=0,${underlay},${MULTICAST}`, `FLOOD,output:${ofport}`),
    flow(c, T.L2_FORWARDING, 60, `reg1=0,${underlay}/0x${UNDERLAY.toString(16)}`, `output:${ofport}`),
    // A plain pod's unicast for a MAC not on the bridge: not on to the VLAN flow below.
    flow(c, T.L2_FORWARDING, 55, 'reg1=0', 'drop'),
    flow(
      c,
      T.L2_FORWARDING,
      50,
      '',
      `push_vlan:0x8100,move:NXM_NX_REG1[0..11]->NXM_OF_VLAN_TCI[0..11],output:${ofport}`,
    ),
  ];
}

/**
 * Bridging mode: the uplink's untagged multicast, to the gateway and each untagged pool pod (plain
 * pods' ports are not on the underlay's L2). Rewritten when an untagged pool pod comes or goes.
 */
export function underlayFloodFlow(gwOfport: number, poolPodOfports: number[]): string {
  return flow(
    UNDERLAY_FLOOD_COOKIE,
    TABLE.L2_FORWARDING,
    110,
    `reg1=0,reg2=0x${(UNDERLAY | FROM_UPLINK).toString(16)},${MULTICAST}`,
    [gwOfport, ...poolPodOfports].map((p) => `output:${p}`).join(','),
  );
}

/**
 * The multicast flow of one VLAN: to each local pod of the VLAN (OVS skips the one it came from) and,
 * in bridging mode, out of the uplink with the VLAN's tag.
 */
export function vlanFloodFlow(vlan: number, podOfports: number[], uplinkOfport?: number): string {
  const out = podOfports.map((p) => `output:${p}`);
  if (uplinkOfport !== undefined)
    out.push('push_vlan:0x8100', `set_field:${0x1000 | vlan}->vlan_vid`, `output:${uplinkOfport}`);
  return flow(
    vlanCookie(vlan),
    TABLE.L2_FORWARDING,
    110,
    `${vlanMatch(vlan)},${MULTICAST}`,
    out.length > 0 ? out.join(',') : 'drop',
  );
}

/** The flows of one pod: what it may send (guards) and how frames reach it (L2 forwarding). */
export function podFlows(p: PodFlowsInput): string[] {
  const T = TABLE;
  const mac = p.mac.toLowerCase();
  const vlan = p.vlan ?? 0;
  const port = `in_port=${p.ofport},dl_src=${mac}`;
  // What the guards record of the pod before passing it on: whether it is a pool pod, and its VLAN.
  // A pod of a VLAN has it from its pool: a pool pod, whether or not the caller said so.
  const underlay = p.underlay === true || vlan !== 0;
  const mark = (underlay ? SET_UNDERLAY : '') + setVlan(vlan);
  const f = (table: number, match: string, actions: string) => flow(p.cookie, table, 200, match, actions);
  const out: string[] = [];
  for (const ip of p.ips) {
    if (!ip.includes(':')) {
      out.push(
        f(T.ARP_SPOOF_GUARD, `arp,${port},arp_spa=${ip},arp_sha=${mac}`, mark + goto(T.ARP_RESPONDER)),
      );
      out.push(f(T.IP_SPOOF_GUARD, `ip,${port},nw_src=${ip}`, mark + goto(T.CT_LOOKUP)));
      continue;
    }
    const ip6 = canonicalIp(ip);
    const ll = eui64LinkLocal(mac);
    const na = `icmp6,${port},icmp_type=136,icmp_code=0`;
    for (const target of [ip6, ll]) {
      // An NA answering a unicast NS may leave out the target link-layer address option (RFC 4861 7.2.4).
      // nd_tll=00:00:00:00:00:00 is never an NA with invalid options (a duplicated TLL, of which Linux
      // takes the first): OVS then clears nd_target as well, and :: is no pod's target.
      for (const tll of [mac, ZERO_MAC]) {
        out.push(f(T.ND_GUARD, `${na},nd_target=${target},nd_tll=${tll}`, goto(T.IP_SPOOF_GUARD)));
      }
    }
    // An NS carries the pod's own MAC as source link-layer address, except DAD's, from :: and without
    // one (RFC 4861 7.1.1; Linux includes it whenever the source is not ::). nd_sll=00:00:00:00:00:00
    // is also what OVS reads when the options are invalid, e.g. a duplicated SLL, of which Linux takes
    // the first: from any source but ::, such an NS would rewrite the receivers' entry for the sender.
    // From the pod's own addresses only: from ::, an NS is a DAD probe, whose target is checked below.
    for (const src of [ip6, ll]) {
      out.push(
        f(
          T.ND_GUARD,
          `icmp6,${port},ipv6_src=${src},icmp_type=135,icmp_code=0,nd_sll=${mac}`,
          goto(T.IP_SPOOF_GUARD),
        ),
      );
    }
    // DAD's target is the pod's own address: a probe for a neighbour's tentative address takes it away.
    for (const target of [ip6, ll]) {
      out.push(
        f(
          T.ND_GUARD,
          `icmp6,${port},ipv6_src=::,icmp_type=135,icmp_code=0,nd_target=${target},nd_sll=${ZERO_MAC}`,
          goto(T.IP_SPOOF_GUARD),
        ),
      );
    }
    const pass = mark + goto(T.CT_LOOKUP);
    out.push(f(T.IP_SPOOF_GUARD, `ipv6,${port},ipv6_src=${ip6}`, pass));
    out.push(f(T.IP_SPOOF_GUARD, `ipv6,${port},ipv6_src=${ll}`, pass));
    out.push(f(T.IP_SPOOF_GUARD, `icmp6,${port},ipv6_src=::`, pass));
  }
  // An ARP probe (RFC 5227: sender IP 0.0.0.0) with the pod's own MAC, for one of its own addresses
  // only: a host running conflict detection on an address gives it up when it hears a probe for it
  // (decision 34). The Linux bridge allows the same.
  for (const ip of p.ips.filter((ip) => !ip.includes(':'))) {
    out.push(
      f(
        T.ARP_SPOOF_GUARD,
        `arp,${port},arp_spa=0.0.0.0,arp_tpa=${ip},arp_sha=${mac}`,
        mark + goto(T.ARP_RESPONDER),
      ),
    );
  }
  // A plain pod takes nothing the uplink brought: the underlay reaches it only through the node.
  const notFromUplink = underlay ? '' : `,reg2=0/0x${FROM_UPLINK.toString(16)}`;
  out.push(f(T.L2_FORWARDING, `${vlanMatch(vlan)}${notFromUplink},dl_dst=${mac}`, `output:${p.ofport}`));
  return out;
}
