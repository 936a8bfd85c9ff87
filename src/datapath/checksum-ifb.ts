/**
 * The checksum hop (decision 32): every frame a pod sends is redirected at its host veth's ingress to
 * one IFB device of the node, whose transmit checksumming is off, before the datapath (bridge, OVS's
 * kernel datapath) and its guards see it. The IFB's `dev_queue_xmit` completes every checksum the pod
 * left pending (`validate_xmit_skb`, `CHECKSUM_PARTIAL` at the `csum_start`/`csum_offset` the pod
 * chose) and hands the frame back to the host veth's receive path; the guard then judges the bytes
 * as they will travel. Unlike turning transmit checksumming off inside the pod, the pod cannot undo
 * it: tc ingress and the IFB are in the node's namespace (a pod with CAP_NET_ADMIN in its own turns
 * its offload back on with `ethtool -K eth0 tx on`).
 *
 * tc ingress runs before a device's rx_handler, where the bridge takes the frame. (On an OVS port tc
 * ingress is ovs-vswitchd's: OVS's kernel datapath forwards from nftables' netdev ingress hook
 * instead, ovs/netdev-ingress-hop.ts, to the same IFB, made by `ensureChecksumIfb`.) The IFB is kept
 * across agent restarts, like the bridge; the qdisc and its filter go with the veth.
 *
 * A pod with an egress rate (pod-bandwidth.ts, decision 42) has its own IFB, also with transmit
 * checksumming off, with a TBF: its host veth redirects there instead, so that it takes one hop, not
 * two. podwire shapes pods' egress itself because the reference `bandwidth` plugin, chained after it,
 * would need the same ingress qdisc ("create ingress qdisc: file exists").
 */
import { CheckFailedError, DatapathError } from '../base/errors.js';
import { EthtoolSocket } from '../kernel/ethtool.js';
import type { Rtnetlink } from '../kernel/netlink/rtnetlink.js';
import { isRedirectAllTo } from '../kernel/netlink/tc-message.js';
import { inNetns, NetnsHandle } from '../kernel/netns.js';
import { podIfbName } from './pod-bandwidth.js';

/** The node's IFB device of the checksum hop. */
export const CHECKSUM_IFB = 'podwire-csum0';

export class ChecksumHop {
  readonly #nl: Rtnetlink;
  readonly #name: string;
  /** The IFB's index; 0 until start(). */
  #ifb = 0;

  constructor(nl: Rtnetlink, name = CHECKSUM_IFB) {
    this.#nl = nl;
    this.#name = name;
  }

  /** The node's IFB (`ensureChecksumIfb`), made or adopted. */
  start(mtu: number): void {
    this.#ifb = ensureChecksumIfb(this.#nl, this.#name, mtu);
  }

  /**
   * Equivalent to: `tc qdisc add dev HOSTVETH ingress; tc filter add dev HOSTVETH ingress protocol all
   * prio 1 u32 match u32 0 0 action mirred egress redirect dev podwire-csum0`, unless there already.
   * Before the veth comes up, so that no frame of the pod reaches the datapath without it.
   */
  redirect(hostIfindex: number, hostIfname: string): void {
    const ifb = this.#target(hostIfname);
    try {
      this.#nl.addIngressQdisc(hostIfindex);
      if (this.#nl.ingressFilters(hostIfindex).some((f) => isRedirectAllTo(f, ifb))) return;
      this.#nl.addIngressRedirect(hostIfindex, ifb);
    } catch (err) {
      throw new DatapathError(
        `cannot redirect the ingress of link ${hostIfindex} to ${this.#name} (the kernel needs the ingress qdisc, cls_u32 and act_mirred)`,
        { cause: err },
      );
    }
  }

  /** Throws ERR_CHECK_FAILED, naming the host veth, when its frames do not pass the hop. */
  check(hostIfname: string, hostIfindex: number): void {
    const ifb = this.#target(hostIfname);
    if (!this.#nl.ingressFilters(hostIfindex).some((f) => isRedirectAllTo(f, ifb)))
      throw new CheckFailedError(
        `host veth ${hostIfname} does not redirect its ingress to ${this.#targetName(hostIfname)} (pending checksums would be completed after the guard)`,
      );
  }

  /** The pod's own IFB (pod-bandwidth.ts) when it has one, else the node's. */
  #target(hostIfname: string): number {
    const shared = this.#requireIfb();
    const own = this.#nl.linkByName(podIfbName(hostIfname));
    return own?.kind === 'ifb' ? own.index : shared;
  }

  #targetName(hostIfname: string): string {
    const own = podIfbName(hostIfname);
    return this.#nl.linkByName(own)?.kind === 'ifb' ? own : this.#name;
  }

  #requireIfb(): number {
    if (this.#ifb === 0) throw new DatapathError(`checksum hop ${this.#name} not set up yet`);
    return this.#ifb;
  }
}

/**
 * Equivalent to: `ip link add NAME mtu MTU type ifb; ethtool -K NAME tx off; ip link set NAME up`
 * (adopted when present); its index. Off again on every start: what the hop is for.
 */
export function ensureChecksumIfb(nl: Rtnetlink, name: string, mtu: number): number {
  let link = nl.linkByName(name);
  if (link && link.kind !== 'ifb')
    throw new DatapathError(`${name} exists and is a ${link.kind ?? 'non-IFB'} link`);
  if (!link) {
    try {
      link = nl.addIfb({ name, mtu });
    } catch (err) {
      throw new DatapathError(`cannot create ${name} (the kernel needs IFB, CONFIG_IFB)`, { cause: err });
    }
  }
  // The largest frame a pod sends must pass it: a pod's MTU is the node's, a GSO frame is segmented.
  if (link.mtu < mtu) nl.setMtu(link.index, mtu);
  // In the node's namespace, which the netlink socket acts in, wherever the calling thread is.
  using home = NetnsHandle.current();
  using node = nl.netns();
  using eth = inNetns(node, home, () => EthtoolSocket.open());
  eth.setTxChecksumming(name, false);
  nl.setLinkUp(link.index);
  return link.index;
}
