/**
 * Bridge VLAN filtering on one rtnetlink socket (`bridge vlan`, `ip link set BR type bridge
 * vlan_filtering 1`): a port's VLANs are IFLA_BRIDGE_VLAN_INFO entries (struct bridge_vlan_info
 * { u16 flags; u16 vid; }) in the IFLA_AF_SPEC of an AF_BRIDGE link message. `Rtnetlink` delegates here.
 */
import { InternalError } from '../../base/errors.js';
import { attrType, decodeAttributes, encodeAttributes, type RtAttr, u8 } from './attributes.js';
import { concatBytes, dataView, HOST_LITTLE_ENDIAN } from './codec.js';
import { encodeLinkBody, ifInfoMsg } from './link-message.js';
import type { NetlinkSocket } from './socket.js';
import {
  BR_BOOLOPT_NO_LL_LEARN,
  BRIDGE_FLAGS_SELF,
  BRIDGE_VLAN_INFO_PVID,
  BRIDGE_VLAN_INFO_UNTAGGED,
  IFLA_BR_MULTI_BOOLOPT,
  IFLA_BR_VLAN_FILTERING,
  IFLA_BRIDGE_FLAGS,
  IFLA_BRIDGE_VLAN_INFO,
  RTEXT_FILTER_BRVLAN,
} from './uapi/if-bridge.js';
import { IFLA_AF_SPEC } from './uapi/if-link.js';
import { NLA_F_NESTED } from './uapi/netlink.js';
import * as R from './uapi/rtnetlink.js';

const AF_BRIDGE = 7;
/** sizeof(struct ifinfomsg) */
const IFINFOMSG_LEN = 16;

/**
 * An AF_BRIDGE link message for port `index` carrying IFLA_AF_SPEC. (The link codec leaves
 * IFLA_AF_SPEC out: in ordinary link messages it is the kernel's per-family configuration, which
 * nothing in podwire reads.)
 */
function bridgeLinkBody(index: number, spec: RtAttr[]): Uint8Array {
  return concatBytes([
    encodeLinkBody({ ifi: ifInfoMsg({ family: AF_BRIDGE, index }), attrs: {} }),
    encodeAttributes([{ type: IFLA_AF_SPEC | NLA_F_NESTED, value: encodeAttributes(spec) }]),
  ]);
}

/** One VLAN of a bridge port, as `bridge vlan show` lists it. */
export interface BridgeVlan {
  vid: number;
  /** Untagged frames arriving on the port belong to this VLAN. */
  pvid: boolean;
  /** Frames of this VLAN leave the port untagged. */
  untagged: boolean;
}

export interface BridgeVlanOptions {
  pvid?: boolean;
  untagged?: boolean;
  /** The bridge device's own VLANs (`self`), rather than a port's. */
  self?: boolean;
}

function checkVid(vid: number): void {
  if (!Number.isInteger(vid) || vid < 1 || vid > 4094)
    throw new InternalError(`bridge VLAN ${vid} is not in 1-4094`);
}

function vlanSpec(vid: number, o: BridgeVlanOptions): RtAttr[] {
  checkVid(vid);
  const info = new Uint8Array(4);
  const flags = (o.pvid ? BRIDGE_VLAN_INFO_PVID : 0) | (o.untagged ? BRIDGE_VLAN_INFO_UNTAGGED : 0);
  dataView(info).setUint16(0, flags, HOST_LITTLE_ENDIAN);
  dataView(info).setUint16(2, vid, HOST_LITTLE_ENDIAN);
  const spec: RtAttr[] = [{ type: IFLA_BRIDGE_VLAN_INFO, value: info }];
  if (o.self) {
    const f = new Uint8Array(2);
    dataView(f).setUint16(0, BRIDGE_FLAGS_SELF, HOST_LITTLE_ENDIAN);
    spec.unshift({ type: IFLA_BRIDGE_FLAGS, value: f });
  }
  return spec;
}

/** Equivalent to: `ip link set dev INDEX type bridge vlan_filtering 0|1`. */
export function setVlanFiltering(sock: NetlinkSocket, index: number, on: boolean): void {
  const data = [{ type: IFLA_BR_VLAN_FILTERING, value: u8.encode(on ? 1 : 0) }];
  // RTM_NEWLINK without NLM_F_CREATE changes an existing link, including its kind's own attributes.
  sock.request(
    R.RTM_NEWLINK,
    0,
    encodeLinkBody({ ifi: ifInfoMsg({ index }), attrs: { linkinfo: { kind: 'bridge', data } } }),
  );
}

/**
 * Equivalent to: `ip link set dev INDEX type bridge no_linklocal_learn 1`. The bridge learns the
 * source MAC of a link-local frame (01:80:c2:00:00:02-0f) where it passes it up, outside every
 * nftables hook; without this a port could move any MAC's forwarding entry to itself.
 */
export function setNoLinklocalLearn(sock: NetlinkSocket, index: number): void {
  const multi = new Uint8Array(8);
  dataView(multi).setUint32(0, 1 << BR_BOOLOPT_NO_LL_LEARN, HOST_LITTLE_ENDIAN);
  dataView(multi).setUint32(4, 1 << BR_BOOLOPT_NO_LL_LEARN, HOST_LITTLE_ENDIAN);
  const data = [{ type: IFLA_BR_MULTI_BOOLOPT, value: multi }];
  sock.request(
    R.RTM_NEWLINK,
    0,
    encodeLinkBody({ ifi: ifInfoMsg({ index }), attrs: { linkinfo: { kind: 'bridge', data } } }),
  );
}

/** Equivalent to: `bridge vlan add dev INDEX vid VID [pvid] [untagged] [self]`; replaces its flags. */
export function addVlan(sock: NetlinkSocket, index: number, vid: number, o: BridgeVlanOptions = {}): void {
  sock.request(R.RTM_SETLINK, 0, bridgeLinkBody(index, vlanSpec(vid, o)));
}

/**
 * Equivalent to: `bridge vlan del dev INDEX vid VID [self]`. Idempotent: the kernel answers success
 * whether the port had the VLAN or not.
 */
export function deleteVlan(
  sock: NetlinkSocket,
  index: number,
  vid: number,
  o: { self?: boolean } = {},
): void {
  sock.request(R.RTM_DELLINK, 0, bridgeLinkBody(index, vlanSpec(vid, o)));
}

/** Equivalent to: `bridge vlan show`: the VLANs of every bridge port, by interface index, in one dump. */
export function allVlans(sock: NetlinkSocket): Map<number, BridgeVlan[]> {
  const request = encodeLinkBody({
    ifi: ifInfoMsg({ family: AF_BRIDGE }),
    attrs: { extMask: RTEXT_FILTER_BRVLAN },
  });
  const out = new Map<number, BridgeVlan[]>();
  for (const m of sock.dump(R.RTM_GETLINK, request)) {
    // Read raw: in AF_BRIDGE dumps IFLA_PROTINFO is a nest, not the one byte the link codec sends.
    if (m.payload.length < IFINFOMSG_LEN) continue;
    const index = dataView(m.payload).getInt32(4, HOST_LITTLE_ENDIAN);
    const spec = decodeAttributes(m.payload.subarray(IFINFOMSG_LEN)).find(
      (a) => attrType(a) === IFLA_AF_SPEC,
    );
    const vlans: BridgeVlan[] = [];
    for (const a of spec ? decodeAttributes(spec.value) : []) {
      if (attrType(a) !== IFLA_BRIDGE_VLAN_INFO || a.value.length < 4) continue;
      const v = dataView(a.value);
      const flags = v.getUint16(0, HOST_LITTLE_ENDIAN);
      vlans.push({
        vid: v.getUint16(2, HOST_LITTLE_ENDIAN),
        pvid: (flags & BRIDGE_VLAN_INFO_PVID) !== 0,
        untagged: (flags & BRIDGE_VLAN_INFO_UNTAGGED) !== 0,
      });
    }
    out.set(index, [...(out.get(index) ?? []), ...vlans]);
  }
  return out;
}

/** Equivalent to: `bridge vlan show dev INDEX`. */
export function vlans(sock: NetlinkSocket, index: number): BridgeVlan[] {
  return allVlans(sock).get(index) ?? [];
}
