/**
 * A pod's bandwidth limits (the CNI `bandwidth` capability, decision 42), shaped as the reference
 * `bandwidth` plugin shapes them, so that a pod's annotation means the same thing:
 * - traffic to the pod (ingress rate): a TBF as the host veth's root qdisc (its egress is the pod's
 *   ingress);
 * - traffic from the pod (egress rate): the pod's own IFB (`pb` + the host veth's hash), with a TBF as
 *   its root qdisc, to which the host veth's ingress is redirected. That IFB has transmit checksumming
 *   off, so it is also the pod's checksum hop (checksum-ifb.ts, decision 32): its frames are redirected
 *   there instead of to the node's shared IFB, and the kernel completes every pending checksum as the
 *   IFB transmits, before the datapath and its guards see the frame.
 *
 * The TBF parameters are the reference plugin's: rate in bytes (bits / 8), the bucket (`buffer`) the
 * time the burst takes at the rate, in psched ticks of 64 ns, the queue (`limit`) 25 ms of the rate plus
 * the burst. A bucket longer than 2^32 ticks (274.9 s of the rate: the kubelet asks for a 4 Gbit burst
 * at any rate) is cut to that, where the reference plugin's arithmetic wraps around.
 */
import { CheckFailedError, DatapathError, InvalidConfigError } from '../base/errors.js';
import { EthtoolSocket } from '../kernel/ethtool.js';
import type { Rtnetlink } from '../kernel/netlink/rtnetlink.js';
import { TBF_HANDLE, type TbfParams } from '../kernel/netlink/tc-message.js';
import { inNetns, NetnsHandle } from '../kernel/netns.js';

/** One direction's limit: rate in bits/s, burst in bits (cni/bandwidth.ts checked them). */
export interface PodRateLimit {
  rateBits: number;
  burstBits: number;
}

export interface PodBandwidth {
  /** Traffic to the pod: a TBF on the host veth. */
  ingress?: PodRateLimit | undefined;
  /** Traffic from the pod: a TBF on the pod's own IFB. */
  egress?: PodRateLimit | undefined;
}

/** Every pod IFB's name starts with this; reconcile removes one whose host veth is gone. */
export const POD_IFB_PREFIX = 'pb';
/** The reference plugin's queue: 25 ms of the rate, in µs. */
const LATENCY_US = 25_000;
/** psched ticks per µs (PSCHED_SHIFT 6: a tick is 64 ns). */
const TICKS_PER_US = 1000 / 64;
const U32_MAX = 0xffffffff;
/** What a frame adds to the MTU on the wire the TBF counts (Ethernet header). */
const ETH_HLEN = 14;

/** The pod's own IFB for a host veth `pw<hash>`: `pb<hash>`, within IFNAMSIZ. */
export function podIfbName(hostIfname: string): string {
  return `${POD_IFB_PREFIX}${hostIfname.slice(2)}`;
}

/** The host veth a pod IFB belongs to (the inverse of `podIfbName`). */
export function hostVethOfPodIfb(ifbName: string, hostPrefix: string): string {
  return `${hostPrefix}${ifbName.slice(POD_IFB_PREFIX.length)}`;
}

/**
 * The TBF for a limit, as the reference plugin computes it. Throws ERR_INVALID_CONFIG, naming `field`,
 * for a burst that holds no full frame (the TBF would drop every full-size frame: the pod's traffic
 * would stop, not slow down).
 */
export function tbfParams(limit: PodRateLimit, mtu: number, field: string): TbfParams {
  const rate = Math.floor(limit.rateBits / 8);
  const burst = Math.floor(limit.burstBits / 8);
  const frame = mtu + ETH_HLEN;
  if (burst < frame) {
    throw new InvalidConfigError(
      `runtimeConfig.bandwidth.${field}: ${limit.burstBits} bits (${burst} bytes) holds no full frame of ${frame} bytes (MTU ${mtu}): every full-size frame would be dropped`,
    );
  }
  const bufferUs = Math.min(Math.floor((burst * 1e6) / rate), U32_MAX);
  const buffer = Math.min(Math.floor(bufferUs * TICKS_PER_US), U32_MAX);
  const limitBytes = Math.min(Math.floor((rate * LATENCY_US) / 1e6) + burst, U32_MAX);
  return { rate, buffer, limit: limitBytes };
}

/** Both directions' TBFs, every check done before anything is created. */
export function planBandwidth(
  bw: PodBandwidth | undefined,
  mtu: number,
): { ingress?: TbfParams; egress?: TbfParams } {
  const out: { ingress?: TbfParams; egress?: TbfParams } = {};
  if (bw?.ingress) out.ingress = tbfParams(bw.ingress, mtu, 'ingressBurst');
  if (bw?.egress) out.egress = tbfParams(bw.egress, mtu, 'egressBurst');
  return out;
}

/** Equivalent to: `tc qdisc replace dev HOSTVETH root handle 1: tbf ...`: traffic to the pod. */
export function shapeIngress(nl: Rtnetlink, hostIfindex: number, tbf: TbfParams): void {
  try {
    nl.replaceRootTbf(hostIfindex, tbf);
  } catch (err) {
    throw new DatapathError(`cannot put a TBF on link ${hostIfindex} (the kernel needs sch_tbf)`, {
      cause: err,
    });
  }
}

/**
 * Equivalent to: `ip link add pbHASH mtu MTU type ifb; ethtool -K pbHASH tx off; tc qdisc replace dev
 * pbHASH root handle 1: tbf ...; ip link set pbHASH up`: the pod's own IFB, which the checksum hop
 * redirects the host veth's ingress to (checksum-ifb.ts). A leftover of the same name (an agent
 * killed mid-ADD) is replaced. Returns its index.
 */
export function createPodIfb(nl: Rtnetlink, hostIfname: string, mtu: number, tbf: TbfParams): number {
  const name = podIfbName(hostIfname);
  if (nl.linkByName(name)) nl.deleteLinkByName(name);
  let index: number;
  try {
    index = nl.addIfb({ name, mtu }).index;
  } catch (err) {
    throw new DatapathError(`cannot create ${name} (the kernel needs IFB, CONFIG_IFB)`, { cause: err });
  }
  try {
    // In the node's namespace, which the netlink socket acts in, wherever the calling thread is.
    using home = NetnsHandle.current();
    using node = nl.netns();
    using eth = inNetns(node, home, () => EthtoolSocket.open());
    eth.setTxChecksumming(name, false);
    shapeIngress(nl, index, tbf);
    nl.setLinkUp(index);
  } catch (err) {
    nl.deleteLinkByName(name);
    throw err;
  }
  return index;
}

/** Equivalent to: `ip link del pbHASH` when there is one. */
export function removePodIfb(nl: Rtnetlink, hostIfname: string): boolean {
  return nl.deleteLinkByName(podIfbName(hostIfname));
}

function sameTbf(a: TbfParams, b: TbfParams): boolean {
  return a.rate === b.rate && a.buffer === b.buffer && a.limit === b.limit;
}

function describe(t: TbfParams): string {
  return `rate ${t.rate * 8} bit/s, buffer ${t.buffer} ticks, limit ${t.limit} bytes`;
}

/** The root TBF podwire put on `index`, if any. */
function rootTbf(nl: Rtnetlink, index: number): TbfParams | undefined {
  return nl.qdiscs(index).find((q) => q.kind === 'tbf' && q.handle === TBF_HANDLE)?.tbf;
}

/**
 * CHECK: the host veth's TBF and the pod's IFB (up, transmit checksumming off, its TBF) are what the
 * limits ask for, and there is none where they ask for none. Throws ERR_CHECK_FAILED naming the drift.
 */
export function checkPodBandwidth(
  nl: Rtnetlink,
  hostIfname: string,
  hostIfindex: number,
  want: { ingress?: TbfParams; egress?: TbfParams },
): void {
  const onVeth = rootTbf(nl, hostIfindex);
  if (want.ingress && !onVeth)
    throw new CheckFailedError(`host veth ${hostIfname} has no TBF for the pod's ingress rate`);
  if (want.ingress && onVeth && !sameTbf(onVeth, want.ingress))
    throw new CheckFailedError(
      `host veth ${hostIfname} shapes at ${describe(onVeth)}, the ingress limit asks for ${describe(want.ingress)}`,
    );
  if (!want.ingress && onVeth)
    throw new CheckFailedError(`host veth ${hostIfname} has a TBF, and no ingress rate is asked for`);
  const name = podIfbName(hostIfname);
  const ifb = nl.linkByName(name);
  if (!want.egress) {
    if (ifb) throw new CheckFailedError(`${name} exists, and no egress rate is asked for`);
    return;
  }
  if (ifb?.kind !== 'ifb') throw new CheckFailedError(`the pod's IFB ${name} is missing`);
  if (!ifb.up) throw new CheckFailedError(`the pod's IFB ${name} is down`);
  using home = NetnsHandle.current();
  using node = nl.netns();
  using eth = inNetns(node, home, () => EthtoolSocket.open());
  if (eth.txChecksumming(name))
    throw new CheckFailedError(
      `the pod's IFB ${name} has transmit checksumming on (pending checksums would pass it unfinished)`,
    );
  const onIfb = rootTbf(nl, ifb.index);
  if (!onIfb) throw new CheckFailedError(`the pod's IFB ${name} has no TBF for the egress rate`);
  if (!sameTbf(onIfb, want.egress))
    throw new CheckFailedError(
      `the pod's IFB ${name} shapes at ${describe(onIfb)}, the egress limit asks for ${describe(want.egress)}`,
    );
}
