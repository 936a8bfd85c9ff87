/**
 * A bridge port's forwarding on one rtnetlink socket: whether the bridge floods unknown unicast out of
 * it (IFLA_BRPORT_UNICAST_FLOOD in a nested IFLA_PROTINFO, as `bridge link set` sends it), and the
 * bridge's forwarding-database entries that point at it (RTM_NEWNEIGH / RTM_DELNEIGH of family
 * AF_BRIDGE with NTF_MASTER, as `bridge fdb ... master` sends them). `Rtnetlink` delegates here.
 *
 * The bridge reads ndm_state its own way: NUD_NOARP is a static entry (never aged, forwarded to the
 * port), NUD_PERMANENT a local one (delivered to the node itself, `bridge fdb` prints "permanent"),
 * anything else a dynamic one. iproute2's `static` sends NUD_NOARP | NUD_REACHABLE (seen with strace
 * of `bridge fdb replace MAC dev X master static`: state 0x42, flags NTF_MASTER, CREATE | REPLACE).
 */
import { constants } from 'node:os';
import { InternalError } from '../../base/errors.js';
import { parseMac } from '../../base/mac.js';
import { KernelError } from '../libc.js';
import { encodeAttributes, u8 } from './attributes.js';
import { concatBytes } from './codec.js';
import { encodeLinkBody, ifInfoMsg } from './link-message.js';
import { decodeNeighBody, encodeNeighBody, fdbFromBody, ndMsg } from './neigh-message.js';
import type { NetlinkSocket } from './socket.js';
import type { FdbEntry } from './types.js';
import { IFLA_BRPORT_UNICAST_FLOOD, IFLA_PROTINFO } from './uapi/if-link.js';
import {
  AF_BRIDGE,
  NTF_MASTER,
  NTF_STICKY,
  NUD_NOARP,
  NUD_PERMANENT,
  NUD_REACHABLE,
} from './uapi/neighbour.js';
import { NLA_F_NESTED, NLM_F_CREATE, NLM_F_REPLACE } from './uapi/netlink.js';
import * as R from './uapi/rtnetlink.js';

/** A static entry of a bridge's forwarding database for one port. */
export interface StaticFdbSpec {
  /** The bridge port. */
  index: number;
  mac: string;
  /** The VLAN the entry is for (a bridge that filters VLANs); absent or 0: none (`bridge fdb` without `vlan`). */
  vlan?: number | undefined;
}

function checkVlan(vlan: number): void {
  if (!Number.isInteger(vlan) || vlan < 0 || vlan > 4094)
    throw new InternalError(`bridge VLAN ${vlan} is not in 0-4094`);
}

function masterFdbBody(spec: StaticFdbSpec, state: number, flags = NTF_MASTER): Uint8Array {
  const vlan = spec.vlan ?? 0;
  checkVlan(vlan);
  const ndm = ndMsg({ family: AF_BRIDGE, index: spec.index, state, flags });
  return encodeNeighBody({ ndm, attrs: { lladdr: parseMac(spec.mac), ...(vlan === 0 ? {} : { vlan }) } });
}

/**
 * Equivalent to: `bridge link set dev INDEX flood on|off`. Off: the bridge no longer sends unicast
 * frames whose destination it has no entry for out of this port; broadcast and multicast are other
 * flags (`bcast_flood`, `mcast_flood`) and still reach it.
 */
export function setUnicastFlood(sock: NetlinkSocket, index: number, on: boolean): void {
  const port = encodeAttributes([{ type: IFLA_BRPORT_UNICAST_FLOOD, value: u8.encode(on ? 1 : 0) }]);
  const body = concatBytes([
    encodeLinkBody({ ifi: ifInfoMsg({ family: AF_BRIDGE, index }), attrs: {} }),
    // Nested: the kernel reads an IFLA_PROTINFO without NLA_F_NESTED as the old one-byte port state.
    encodeAttributes([{ type: IFLA_PROTINFO | NLA_F_NESTED, value: port }]),
  ]);
  sock.request(R.RTM_SETLINK, 0, body);
}

/**
 * Equivalent to: `bridge fdb replace MAC dev INDEX master static sticky [vlan VID]`. Replaces an entry
 * the bridge learned for the MAC (or one on another port) with a static one on this port. Sticky: a
 * static entry alone is moved by learning to any port a frame with its MAC as source comes in on (the
 * uplink in bridging mode, a pod without guards), and with it the pod's traffic. A VLAN must already
 * be one of the port's.
 */
export function setStaticFdb(sock: NetlinkSocket, spec: StaticFdbSpec): void {
  sock.request(
    R.RTM_NEWNEIGH,
    NLM_F_CREATE | NLM_F_REPLACE,
    masterFdbBody(spec, NUD_NOARP | NUD_REACHABLE, NTF_MASTER | NTF_STICKY),
  );
}

/** Equivalent to: `bridge fdb del MAC dev INDEX master [vlan VID]`. False when there is no such entry (ENOENT). */
export function deleteMasterFdb(sock: NetlinkSocket, spec: StaticFdbSpec): boolean {
  try {
    sock.request(R.RTM_DELNEIGH, 0, masterFdbBody(spec, NUD_NOARP));
    return true;
  } catch (err) {
    if (err instanceof KernelError && err.errno === constants.errno.ENOENT) return false;
    throw err;
  }
}

/**
 * Equivalent to: `bridge fdb show brport INDEX`: the bridge's entries for the port (NTF_MASTER) and the
 * port device's own (NTF_SELF). The request is an ifinfomsg naming the port, which the kernel reads as
 * a filter, so the dump holds this port's entries only (a bare ndmsg would be every device's).
 */
export function portFdb(sock: NetlinkSocket, index: number): FdbEntry[] {
  const request = encodeLinkBody({ ifi: ifInfoMsg({ family: AF_BRIDGE, index }), attrs: {} });
  return sock
    .dump(R.RTM_GETNEIGH, request)
    .filter((m) => m.header.type === R.RTM_NEWNEIGH)
    .map((m) => fdbFromBody(decodeNeighBody(m.payload)))
    .filter((e) => e.index === index);
}

/**
 * A static entry of the bridge (`bridge fdb` prints "master BRIDGE static"), neither local nor learned.
 * The bridge marks its entries by NDA_MASTER; it reports ndm_flags without NTF_MASTER.
 */
export function isStaticMasterEntry(e: FdbEntry): boolean {
  return e.master !== undefined && (e.state & NUD_NOARP) !== 0 && (e.state & NUD_PERMANENT) === 0;
}

/** An entry learning never moves (`bridge fdb` prints "sticky"). */
export function isStickyEntry(e: FdbEntry): boolean {
  return (e.flags & NTF_STICKY) !== 0;
}
