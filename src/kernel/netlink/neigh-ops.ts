/**
 * Neighbour (ARP/NDP) and forwarding-database operations on one rtnetlink socket: what an overlay
 * programs for each remote node (its VTEP MAC behind its underlay IP). `Rtnetlink` delegates here.
 */
import { constants } from 'node:os';
import { formatIpBytes, parseIpBytes } from '../../base/ip.js';
import { formatMac, parseMac } from '../../base/mac.js';
import { inetFamily, KernelError } from '../libc.js';
import { decodeNeighBody, encodeNeighBody, fdbFromBody, ndMsg, neighFromBody } from './neigh-message.js';
import type { BatchRequest, NetlinkSocket } from './socket.js';
import type { FdbEntry, FdbSpec, Neigh, NeighSpec } from './types.js';
import { AF_BRIDGE, NTF_SELF, NUD_PERMANENT } from './uapi/neighbour.js';
import { NLM_F_CREATE, NLM_F_REPLACE } from './uapi/netlink.js';
import * as R from './uapi/rtnetlink.js';

const AF_UNSPEC = 0;
const CREATE_OR_REPLACE = NLM_F_CREATE | NLM_F_REPLACE;

/** Runs a delete; false when the kernel answers ENOENT (no such entry). */
function deleted(run: () => void): boolean {
  try {
    run();
    return true;
  } catch (err) {
    if (err instanceof KernelError && err.errno === constants.errno.ENOENT) return false;
    throw err;
  }
}

/** The request of `setNeigh`, for a batch. */
export function setNeighRequest(spec: NeighSpec): BatchRequest {
  const ip = parseIpBytes(spec.address);
  const ndm = ndMsg({ family: inetFamily(ip.family), index: spec.index, state: NUD_PERMANENT });
  const payload = encodeNeighBody({ ndm, attrs: { dst: ip.bytes, lladdr: parseMac(spec.mac) } });
  return { type: R.RTM_NEWNEIGH, flags: CREATE_OR_REPLACE, payload };
}

/** Equivalent to: `ip neigh replace ADDRESS lladdr MAC dev INDEX nud permanent`. */
export function setNeigh(sock: NetlinkSocket, spec: NeighSpec): void {
  const r = setNeighRequest(spec);
  sock.request(r.type, r.flags, r.payload);
}

/** The request of `deleteNeigh`, for a batch (ENOENT when absent). */
export function deleteNeighRequest(spec: { index: number; address: string }): BatchRequest {
  const ip = parseIpBytes(spec.address);
  const payload = encodeNeighBody({
    ndm: ndMsg({ family: inetFamily(ip.family), index: spec.index }),
    attrs: { dst: ip.bytes },
  });
  return { type: R.RTM_DELNEIGH, flags: 0, payload };
}

/** Equivalent to: `ip neigh del ADDRESS dev INDEX`. False when there is no such entry (ENOENT). */
export function deleteNeigh(sock: NetlinkSocket, spec: { index: number; address: string }): boolean {
  const r = deleteNeighRequest(spec);
  return deleted(() => sock.request(r.type, r.flags, r.payload));
}

/** Equivalent to: `ip [-4|-6] neigh show nud all [dev INDEX]` (proxy entries excluded). */
export function neighbours(sock: NetlinkSocket, filter: { index?: number; family?: number } = {}): Neigh[] {
  // NDA_IFINDEX lets the kernel filter the dump; the filters below still apply (older kernels ignore it).
  const request = encodeNeighBody({
    ndm: ndMsg({ family: filter.family ?? AF_UNSPEC }),
    attrs: filter.index === undefined ? {} : { ifindex: filter.index },
  });
  return sock
    .dump(R.RTM_GETNEIGH, request)
    .filter((m) => m.header.type === R.RTM_NEWNEIGH)
    .map((m) => neighFromBody(decodeNeighBody(m.payload)))
    .filter((n) => filter.index === undefined || n.index === filter.index)
    .filter((n) => filter.family === undefined || n.family === filter.family);
}

/** The request of `setFdb`, for a batch. */
export function setFdbRequest(spec: FdbSpec): BatchRequest {
  const ndm = ndMsg({ family: AF_BRIDGE, index: spec.index, state: NUD_PERMANENT, flags: NTF_SELF });
  const attrs = { lladdr: parseMac(spec.mac), dst: parseIpBytes(spec.dst).bytes };
  return { type: R.RTM_NEWNEIGH, flags: CREATE_OR_REPLACE, payload: encodeNeighBody({ ndm, attrs }) };
}

/** Equivalent to: `bridge fdb replace MAC dev INDEX dst IP self permanent`. */
export function setFdb(sock: NetlinkSocket, spec: FdbSpec): void {
  const r = setFdbRequest(spec);
  sock.request(r.type, r.flags, r.payload);
}

/**
 * The request of `bridge fdb del MAC dev INDEX dst IP self`, for a batch: unlike `deleteFdb` it does
 * not look first (vxlan answers success, deleting nothing, when the MAC has no such remote).
 */
export function deleteFdbRequest(spec: { index: number; mac: string; dst: string }): BatchRequest {
  const ndm = ndMsg({ family: AF_BRIDGE, index: spec.index, state: NUD_PERMANENT, flags: NTF_SELF });
  const attrs = { lladdr: parseMac(spec.mac), dst: parseIpBytes(spec.dst).bytes };
  return { type: R.RTM_DELNEIGH, flags: 0, payload: encodeNeighBody({ ndm, attrs }) };
}

/**
 * Equivalent to: `bridge fdb del MAC dev INDEX [dst IP] self`. Without dst the entry goes with all
 * its remotes. False when there is no such entry (ENOENT), or it has no such remote.
 */
export function deleteFdb(sock: NetlinkSocket, spec: { index: number; mac: string; dst?: string }): boolean {
  if (spec.dst !== undefined) {
    // vxlan answers success, deleting nothing, when the MAC is there without this remote: look first.
    const mac = formatMac(parseMac(spec.mac));
    const dst = formatIpBytes(parseIpBytes(spec.dst).bytes);
    if (!fdb(sock, { index: spec.index }).some((e) => e.mac === mac && e.dst === dst)) return false;
  }
  // NUD_PERMANENT: devices without their own fdb (ndo_dflt_fdb_del) refuse any other state.
  const ndm = ndMsg({ family: AF_BRIDGE, index: spec.index, state: NUD_PERMANENT, flags: NTF_SELF });
  const body = encodeNeighBody({
    ndm,
    attrs: {
      lladdr: parseMac(spec.mac),
      ...(spec.dst === undefined ? {} : { dst: parseIpBytes(spec.dst).bytes }),
    },
  });
  return deleted(() => sock.request(R.RTM_DELNEIGH, 0, body));
}

/**
 * Equivalent to: `bridge fdb show [dev INDEX]`. A bare ndmsg asks for every device's entries (a longer
 * request would be read as a filtering ifinfomsg), so the index filter applies here.
 */
export function fdb(sock: NetlinkSocket, filter: { index?: number } = {}): FdbEntry[] {
  const request = encodeNeighBody({ ndm: ndMsg({ family: AF_BRIDGE }), attrs: {} });
  return sock
    .dump(R.RTM_GETNEIGH, request)
    .filter((m) => m.header.type === R.RTM_NEWNEIGH)
    .map((m) => fdbFromBody(decodeNeighBody(m.payload)))
    .filter((e) => filter.index === undefined || e.index === filter.index);
}
