/**
 * struct tcmsg and the few traffic-control attributes podwire sends: the ingress qdisc, and a u32
 * filter that matches every frame (one key, mask 0) with one action, act_mirred redirecting to a
 * device's egress. Encoded as `tc` sends them (strace of `tc filter add dev X ingress protocol all
 * prio 1 u32 match u32 0 0 action mirred egress redirect dev Y`), and read back from a filter dump.
 */
import {
  attrType,
  cstring,
  decodeAttributes,
  encodeAttributes,
  findAttr,
  type RtAttr,
} from './attributes.js';
import { concatBytes, dataView, HOST_LITTLE_ENDIAN } from './codec.js';
import { NetlinkProtocolError } from './errors.js';
import { NLA_F_NESTED } from './uapi/netlink.js';
import * as T from './uapi/tc.js';

export const TCMSG_LEN = 20;

/** struct tcmsg { u8 family, pad[3]; int ifindex; u32 handle, parent, info }. */
export interface TcMsg {
  ifindex: number;
  handle: number;
  parent: number;
  /** For a filter: TC_H_MAKE(prio << 16, protocol in network byte order). */
  info: number;
}

export function encodeTcMsg(t: TcMsg): Uint8Array {
  const out = new Uint8Array(TCMSG_LEN);
  const v = dataView(out);
  v.setInt32(4, t.ifindex, HOST_LITTLE_ENDIAN);
  v.setUint32(8, t.handle >>> 0, HOST_LITTLE_ENDIAN);
  v.setUint32(12, t.parent >>> 0, HOST_LITTLE_ENDIAN);
  v.setUint32(16, t.info >>> 0, HOST_LITTLE_ENDIAN);
  return out;
}

export function decodeTcMsg(b: Uint8Array): TcMsg {
  if (b.length < TCMSG_LEN)
    throw new NetlinkProtocolError(`tcmsg of ${b.length} bytes, expected ${TCMSG_LEN}`);
  const v = dataView(b);
  return {
    ifindex: v.getInt32(4, HOST_LITTLE_ENDIAN),
    handle: v.getUint32(8, HOST_LITTLE_ENDIAN),
    parent: v.getUint32(12, HOST_LITTLE_ENDIAN),
    info: v.getUint32(16, HOST_LITTLE_ENDIAN),
  };
}

/** The u16 protocol as the kernel stores it in tcm_info: network byte order, read as a host integer. */
function protocolField(protocol: number): number {
  return HOST_LITTLE_ENDIAN ? ((protocol & 0xff) << 8) | (protocol >> 8) : protocol;
}

/** Equivalent to: `tc qdisc add dev IFINDEX ingress` (the request's body). */
export function ingressQdiscBody(ifindex: number): Uint8Array {
  return concatBytes([
    encodeTcMsg({ ifindex, handle: T.TC_H_INGRESS_HANDLE, parent: T.TC_H_INGRESS, info: 0 }),
    encodeAttributes([
      { type: T.TCA_KIND, value: cstring.encode('ingress') },
      // `tc` sends an empty options nest; the ingress qdisc takes none.
      { type: T.TCA_OPTIONS, value: new Uint8Array(0) },
    ]),
  ]);
}

/** struct tc_u32_sel with one struct tc_u32_key { be32 mask, val; int off, offmask } of mask 0: every frame. */
function matchAllSelector(): Uint8Array {
  const out = new Uint8Array(16 + 16);
  out[0] = T.TC_U32_TERMINAL; // flags
  out[2] = 1; // nkeys; the key (mask 0, val 0, off 0, offmask 0) is all zeros
  return out;
}

/** struct tc_mirred { tc_gen: u32 index, capab; int action, refcnt, bindcnt; int eaction; u32 ifindex }. */
function mirredParms(ifindex: number): Uint8Array {
  const out = new Uint8Array(28);
  const v = dataView(out);
  v.setInt32(8, T.TC_ACT_STOLEN, HOST_LITTLE_ENDIAN);
  v.setInt32(20, T.TCA_EGRESS_REDIR, HOST_LITTLE_ENDIAN);
  v.setUint32(24, ifindex, HOST_LITTLE_ENDIAN);
  return out;
}

/** The ingress filters' priority podwire uses. */
export const INGRESS_REDIRECT_PRIO = 1;

/**
 * Equivalent to: `tc filter add dev IFINDEX ingress protocol all prio 1 u32 match u32 0 0 action
 * mirred egress redirect dev TARGET` (the request's body).
 */
export function ingressRedirectFilterBody(ifindex: number, target: number): Uint8Array {
  const mirred = encodeAttributes([
    { type: T.TCA_ACT_KIND, value: cstring.encode('mirred') },
    {
      type: T.TCA_ACT_OPTIONS | NLA_F_NESTED,
      value: encodeAttributes([{ type: T.TCA_MIRRED_PARMS, value: mirredParms(target) }]),
    },
  ]);
  const options = encodeAttributes([
    { type: T.TCA_U32_SEL, value: matchAllSelector() },
    // The actions in order, each a nest numbered from 1.
    {
      type: T.TCA_U32_ACT | NLA_F_NESTED,
      value: encodeAttributes([{ type: 1 | NLA_F_NESTED, value: mirred }]),
    },
  ]);
  return concatBytes([
    encodeTcMsg({
      ifindex,
      handle: 0,
      parent: T.TC_H_INGRESS_HANDLE,
      info: ((INGRESS_REDIRECT_PRIO << 16) | protocolField(T.ETH_P_ALL)) >>> 0,
    }),
    encodeAttributes([
      { type: T.TCA_KIND, value: cstring.encode('u32') },
      { type: T.TCA_OPTIONS | NLA_F_NESTED, value: options },
    ]),
  ]);
}

/** A filter of a dump, as far as podwire reads it. */
export interface TcFilter {
  ifindex: number;
  kind: string;
  prio: number;
  /** Host byte order. */
  protocol: number;
  /** u32: the selector has keys and every key's mask is 0 (it matches every frame). */
  matchesAll?: boolean;
  /** u32: the actions' kinds, in order; with mirred's redirect target and verdict. */
  actions?: Array<{ kind: string; eaction?: number; ifindex?: number; action?: number }>;
}

function nested(attrs: readonly RtAttr[], type: number): RtAttr[] {
  const a = findAttr(attrs, type);
  return a === undefined ? [] : decodeAttributes(a.value);
}

function decodeU32Options(options: RtAttr[], out: TcFilter): void {
  const sel = findAttr(options, T.TCA_U32_SEL)?.value;
  if (sel !== undefined && sel.length >= 16) {
    const v = dataView(sel);
    const nkeys = sel[2] ?? 0;
    let all = nkeys > 0 && sel.length >= 16 + 16 * nkeys;
    for (let i = 0; all && i < nkeys; i++) if (v.getUint32(16 + 16 * i, false) !== 0) all = false;
    out.matchesAll = all;
  }
  const acts = findAttr(options, T.TCA_U32_ACT);
  if (acts === undefined) return;
  out.actions = decodeAttributes(acts.value)
    .sort((a, b) => attrType(a) - attrType(b))
    .map((act) => {
      const attrs = decodeAttributes(act.value);
      const kindAttr = findAttr(attrs, T.TCA_ACT_KIND);
      const kind = kindAttr === undefined ? '' : cstring.decode(kindAttr.value, T.TCA_ACT_KIND);
      const parms = findAttr(nested(attrs, T.TCA_ACT_OPTIONS), T.TCA_MIRRED_PARMS)?.value;
      if (kind !== 'mirred' || parms === undefined || parms.length < 28) return { kind };
      const v = dataView(parms);
      return {
        kind,
        action: v.getInt32(8, HOST_LITTLE_ENDIAN),
        eaction: v.getInt32(20, HOST_LITTLE_ENDIAN),
        ifindex: v.getUint32(24, HOST_LITTLE_ENDIAN),
      };
    });
}

/** One RTM_NEWTFILTER message of a dump. */
export function decodeFilter(body: Uint8Array): TcFilter {
  const t = decodeTcMsg(body);
  const attrs = decodeAttributes(body.subarray(TCMSG_LEN));
  const kindAttr = findAttr(attrs, T.TCA_KIND);
  const proto = t.info & 0xffff;
  const out: TcFilter = {
    ifindex: t.ifindex,
    kind: kindAttr === undefined ? '' : cstring.decode(kindAttr.value, T.TCA_KIND),
    prio: t.info >>> 16,
    protocol: protocolField(proto),
  };
  if (out.kind === 'u32') decodeU32Options(nested(attrs, T.TCA_OPTIONS), out);
  return out;
}

/** The request body of a dump of a device's ingress filters (`tc filter show dev IFINDEX ingress`). */
export function ingressFilterDumpBody(ifindex: number): Uint8Array {
  return encodeTcMsg({ ifindex, handle: 0, parent: T.TC_H_INGRESS_HANDLE, info: 0 });
}

/** Whether `f` redirects every frame to `target`'s egress, as `ingressRedirectFilterBody` asks. */
export function isRedirectAllTo(f: TcFilter, target: number): boolean {
  const a = f.actions?.[0];
  return (
    f.kind === 'u32' &&
    f.protocol === T.ETH_P_ALL &&
    f.matchesAll === true &&
    f.actions?.length === 1 &&
    a?.kind === 'mirred' &&
    a.eaction === T.TCA_EGRESS_REDIR &&
    a.action === T.TC_ACT_STOLEN &&
    a.ifindex === target
  );
}

/** A TBF's parameters as the kernel keeps them (struct tc_tbf_qopt, and TCA_TBF_RATE64). */
export interface TbfParams {
  /** Bytes per second. */
  rate: number;
  /** The bucket, in psched ticks of 64 ns (PSCHED_SHIFT 6). */
  buffer: number;
  /** The queue behind it, in bytes. */
  limit: number;
}

/** The TBF root qdisc's handle podwire gives it: `1:`, as the reference bandwidth plugin does. */
export const TBF_HANDLE = 0x00010000;

/**
 * struct tc_tbf_qopt { struct tc_ratespec rate, peakrate; u32 limit, buffer, mtu }, tc_ratespec being
 * { u8 cell_log, linklayer; u16 overhead; s16 cell_align; u16 mpu; u32 rate }: 36 bytes.
 */
function tbfQopt(p: TbfParams): Uint8Array {
  const out = new Uint8Array(36);
  const v = dataView(out);
  out[1] = T.TC_LINKLAYER_ETHERNET;
  v.setUint32(8, Math.min(p.rate, 0xffffffff), HOST_LITTLE_ENDIAN);
  v.setUint32(24, p.limit >>> 0, HOST_LITTLE_ENDIAN);
  v.setUint32(28, p.buffer >>> 0, HOST_LITTLE_ENDIAN);
  return out;
}

/**
 * Equivalent to: `tc qdisc add dev IFINDEX root handle 1: tbf rate RATE buffer BUFFER limit LIMIT` (the
 * request's body); a rate of 2^32 bytes/s or more goes in TCA_TBF_RATE64, as `tc` sends it.
 */
export function rootTbfBody(ifindex: number, p: TbfParams): Uint8Array {
  const options: RtAttr[] = [{ type: T.TCA_TBF_PARMS, value: tbfQopt(p) }];
  if (p.rate >= 2 ** 32) {
    const rate64 = new Uint8Array(8);
    dataView(rate64).setBigUint64(0, BigInt(p.rate), HOST_LITTLE_ENDIAN);
    options.push({ type: T.TCA_TBF_RATE64, value: rate64 });
  }
  return concatBytes([
    encodeTcMsg({ ifindex, handle: TBF_HANDLE, parent: T.TC_H_ROOT, info: 0 }),
    encodeAttributes([
      { type: T.TCA_KIND, value: cstring.encode('tbf') },
      { type: T.TCA_OPTIONS | NLA_F_NESTED, value: encodeAttributes(options) },
    ]),
  ]);
}

/** A qdisc of a dump, as far as podwire reads it. */
export interface TcQdisc {
  ifindex: number;
  handle: number;
  parent: number;
  kind: string;
  /** For a TBF. */
  tbf?: TbfParams;
}

/** One RTM_NEWQDISC message of a dump. */
export function decodeQdisc(body: Uint8Array): TcQdisc {
  const t = decodeTcMsg(body);
  const attrs = decodeAttributes(body.subarray(TCMSG_LEN));
  const kindAttr = findAttr(attrs, T.TCA_KIND);
  const out: TcQdisc = {
    ifindex: t.ifindex,
    handle: t.handle,
    parent: t.parent,
    kind: kindAttr === undefined ? '' : cstring.decode(kindAttr.value, T.TCA_KIND),
  };
  if (out.kind !== 'tbf') return out;
  const options = nested(attrs, T.TCA_OPTIONS);
  const parms = findAttr(options, T.TCA_TBF_PARMS)?.value;
  if (parms === undefined || parms.length < 36) return out;
  const v = dataView(parms);
  const rate64 = findAttr(options, T.TCA_TBF_RATE64)?.value;
  out.tbf = {
    rate:
      rate64 !== undefined && rate64.length >= 8
        ? Number(dataView(rate64).getBigUint64(0, HOST_LITTLE_ENDIAN))
        : v.getUint32(8, HOST_LITTLE_ENDIAN),
    limit: v.getUint32(24, HOST_LITTLE_ENDIAN),
    buffer: v.getUint32(28, HOST_LITTLE_ENDIAN),
  };
  return out;
}

/** The request body of a dump of every qdisc (`tc qdisc show`); the kernel ignores the ifindex. */
export function qdiscDumpBody(): Uint8Array {
  return encodeTcMsg({ ifindex: 0, handle: 0, parent: 0, info: 0 });
}
