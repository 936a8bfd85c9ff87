/**
 * A synchronous rtnetlink client: links, addresses and routes of ONE network namespace, the one the
 * calling thread was in when `Rtnetlink.open()` ran. Open it while switched into a pod's namespace
 * and it keeps acting there after the thread switches back. Every request carries NLM_F_ACK and
 * waits for its answer (at most the receive timeout); nothing runs in the background.
 */
import { closeSync } from 'node:fs';
import { constants } from 'node:os';
import { InternalError } from '../../base/errors.js';
import { ipValueToBytes, parseAddressWithPrefix, parseIpBytes } from '../../base/ip.js';
import { parseMac } from '../../base/mac.js';
import { AF_INET, AF_INET6, inetFamily, KernelError } from '../libc.js';
import { NetnsHandle } from '../netns.js';
import { addrFromBody, decodeAddrBody, encodeAddrBody } from './addr-message.js';
import type { RtAttr } from './attributes.js';
import type { StaticFdbSpec } from './bridge-port.js';
import * as BridgePortOps from './bridge-port.js';
import type { BridgeVlan, BridgeVlanOptions } from './bridge-vlan.js';
import * as BridgeVlanOps from './bridge-vlan.js';
import {
  decodeLinkBody,
  encodeLinkBody,
  ifInfoMsg,
  type LinkAttributes,
  linkFromBody,
} from './link-message.js';
import * as NeighOps from './neigh-ops.js';
import {
  decodeRouteBody,
  encodeRouteBody,
  type RouteAttributes,
  routeFromBody,
  rtMsg,
} from './route-message.js';
import { type BatchFailure, type BatchRequest, NetlinkSocket, type NetlinkSocketOptions } from './socket.js';
import {
  decodeFilter,
  decodeQdisc,
  ingressFilterDumpBody,
  ingressQdiscBody,
  ingressRedirectFilterBody,
  qdiscDumpBody,
  rootTbfBody,
  type TbfParams,
  type TcFilter,
  type TcQdisc,
} from './tc-message.js';
import type {
  Addr,
  AddressOptions,
  AddressSpec,
  BridgeSpec,
  FdbEntry,
  FdbSpec,
  Link,
  Neigh,
  NeighSpec,
  Route,
  RouteSpec,
  VethSpec,
  VxlanSpec,
} from './types.js';
import { IFF_UP } from './uapi/if.js';
import { IFA_F_NODAD, IFA_F_NOPREFIXROUTE } from './uapi/if-addr.js';
import { IFLA_BRPORT_MODE } from './uapi/if-link.js';
import { NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE } from './uapi/netlink.js';
import * as R from './uapi/rtnetlink.js';
import { vxlanLinkAttributes } from './vxlan-data.js';

const AF_UNSPEC = 0;
const AF_BRIDGE = 7;
const CREATE = NLM_F_CREATE | NLM_F_EXCL;
const CREATE_OR_REPLACE = NLM_F_CREATE | NLM_F_REPLACE;

function isErrno(err: unknown, errno: number): boolean {
  return err instanceof KernelError && err.errno === errno;
}

export interface RtnetlinkOptions extends NetlinkSocketOptions {
  /**
   * Also open this many sockets, in the same namespace, for the `...Async` operations, whose kernel
   * work runs on worker threads, one request in flight per socket. Opened now, never later: later the
   * thread may be in another namespace. Default 0 (no async operations).
   */
  asyncSockets?: number;
}

export class Rtnetlink implements Disposable {
  readonly #sock: NetlinkSocket;
  /** The sockets of the `...Async` operations, with the requests queued on each; empty unless opened with `asyncSockets`. */
  readonly #asyncSocks: Array<{ sock: NetlinkSocket; queued: number }>;
  /** Every asynchronous link deletion in flight, settled or not (see `deletionsSettled`). */
  readonly #deletions = new Set<Promise<void>>();

  private constructor(sock: NetlinkSocket, asyncSocks: NetlinkSocket[]) {
    this.#sock = sock;
    this.#asyncSocks = asyncSocks.map((s) => ({ sock: s, queued: 0 }));
  }

  /** Opens a client bound to the calling thread's current network namespace. */
  static open(options: RtnetlinkOptions = {}): Rtnetlink {
    const opened: NetlinkSocket[] = [];
    try {
      opened.push(NetlinkSocket.open(options));
      for (let i = 0; i < (options.asyncSockets ?? 0); i++) opened.push(NetlinkSocket.open(options));
    } catch (err) {
      for (const s of opened) s.close();
      throw err;
    }
    const [sock, ...asyncSocks] = opened as [NetlinkSocket, ...NetlinkSocket[]];
    return new Rtnetlink(sock, asyncSocks);
  }

  get closed(): boolean {
    return this.#sock.closed;
  }

  /** Closes the sockets; idempotent. Every later call throws NetlinkClosedError. */
  close(): void {
    this.#sock.close();
    for (const a of this.#asyncSocks) a.sock.close();
  }

  /** Runs one request on the least busy async socket. */
  async #requestAsync(type: number, flags: number, payload: Uint8Array) {
    if (this.#asyncSocks.length === 0) {
      throw new InternalError('Rtnetlink opened without asyncSockets');
    }
    const slot = this.#asyncSocks.reduce((a, b) => (b.queued < a.queued ? b : a));
    slot.queued++;
    try {
      return await slot.sock.requestAsync(type, flags, payload);
    } finally {
      slot.queued--;
    }
  }

  [Symbol.dispose](): void {
    this.close();
  }

  /**
   * The network namespace this client acts in, for what only another socket does there (ethtool):
   * the calling thread may be elsewhere (a test's, or a datapath opened in a node namespace).
   */
  netns(): NetnsHandle {
    const fd = this.#sock.netnsFd();
    try {
      return NetnsHandle.open(`/proc/self/fd/${fd}`);
    } finally {
      closeSync(fd);
    }
  }

  // Links

  /** Equivalent to: `ip link show dev NAME`. Undefined when there is no such link. */
  linkByName(name: string): Link | undefined {
    return this.#getLink(0, { ifname: name });
  }

  /** Equivalent to: `ip link show` filtered on ifindex INDEX. Undefined when there is no such link. */
  linkByIndex(index: number): Link | undefined {
    return this.#getLink(index, {});
  }

  #getLink(index: number, attrs: LinkAttributes): Link | undefined {
    try {
      const replies = this.#sock.request(
        R.RTM_GETLINK,
        0,
        encodeLinkBody({ ifi: ifInfoMsg({ index }), attrs }),
      );
      const reply = replies.find((m) => m.header.type === R.RTM_NEWLINK);
      return reply === undefined ? undefined : linkFromBody(decodeLinkBody(reply.payload));
    } catch (err) {
      if (isErrno(err, constants.errno.ENODEV)) return undefined;
      throw err;
    }
  }

  /** Equivalent to: `ip link show`. */
  links(): Link[] {
    const messages = this.#sock.dump(R.RTM_GETLINK, encodeLinkBody({ ifi: ifInfoMsg(), attrs: {} }));
    return messages
      .filter((m) => m.header.type === R.RTM_NEWLINK)
      .map((m) => linkFromBody(decodeLinkBody(m.payload)));
  }

  /**
   * Creates a veth pair; the peer is created directly in the namespace of `peerNetnsFd` when given.
   * Returns the end named `name`. Equivalent to:
   * `ip link add NAME mtu M [address MAC] [group G] type veth peer name PEER mtu M [address PEERMAC] netns FD`.
   */
  addVeth(spec: VethSpec): Link {
    const peer: LinkAttributes = { ifname: spec.peerName, mtu: spec.mtu };
    if (spec.peerMac !== undefined) peer.address = parseMac(spec.peerMac);
    if (spec.peerNetnsFd !== undefined) peer.netNsFd = spec.peerNetnsFd;
    const attrs: LinkAttributes = {
      ifname: spec.name,
      mtu: spec.mtu,
      linkinfo: { kind: 'veth', peer: { ifi: ifInfoMsg(), attrs: peer } },
    };
    if (spec.mac !== undefined) attrs.address = parseMac(spec.mac);
    if (spec.group !== undefined) attrs.group = spec.group;
    this.#sock.request(R.RTM_NEWLINK, CREATE, encodeLinkBody({ ifi: ifInfoMsg(), attrs }));
    return this.#created(spec.name);
  }

  /** Equivalent to: `ip link add NAME mtu M [address MAC] type bridge`. */
  addBridge(spec: BridgeSpec): Link {
    const attrs: LinkAttributes = { ifname: spec.name, mtu: spec.mtu, linkinfo: { kind: 'bridge' } };
    if (spec.mac !== undefined) attrs.address = parseMac(spec.mac);
    this.#sock.request(R.RTM_NEWLINK, CREATE, encodeLinkBody({ ifi: ifInfoMsg(), attrs }));
    return this.#created(spec.name);
  }

  /** Equivalent to: `ip link add NAME mtu M type ifb`. */
  addIfb(spec: { name: string; mtu: number }): Link {
    const attrs: LinkAttributes = { ifname: spec.name, mtu: spec.mtu, linkinfo: { kind: 'ifb' } };
    this.#sock.request(R.RTM_NEWLINK, CREATE, encodeLinkBody({ ifi: ifInfoMsg(), attrs }));
    return this.#created(spec.name);
  }

  /**
   * Equivalent to: `ip link add NAME mtu M [address MAC] type vxlan id VNI dstport PORT [local IP]
   * [dev UNDERLAY] nolearning` (`learning` when spec.learning is true).
   */
  addVxlan(spec: VxlanSpec): Link {
    const body = encodeLinkBody({ ifi: ifInfoMsg(), attrs: vxlanLinkAttributes(spec) });
    this.#sock.request(R.RTM_NEWLINK, CREATE, body);
    return this.#created(spec.name);
  }

  #created(name: string): Link {
    const link = this.linkByName(name);
    // Only another actor deleting it in between makes this happen.
    if (link === undefined) throw new KernelError(R.rtmTypeName(R.RTM_GETLINK), constants.errno.ENODEV);
    return link;
  }

  /** Equivalent to: `ip link set dev INDEX up`. */
  setLinkUp(index: number): void {
    this.#setLink(index, { flags: IFF_UP, change: IFF_UP }, {});
  }

  /**
   * Equivalent to: `ip link set dev INDEX alias TEXT`. The kernel ignores IFLA_IFALIAS when it creates
   * a link, so it is set afterwards.
   */
  setLinkAlias(index: number, alias: string): void {
    this.#setLink(index, {}, { ifalias: alias });
  }

  /** Equivalent to: `ip link set dev INDEX group GROUP`. */
  setLinkGroup(index: number, group: number): void {
    this.#setLink(index, {}, { group });
  }

  /** Equivalent to: `ip link set dev INDEX down`. */
  setLinkDown(index: number): void {
    this.#setLink(index, { flags: 0, change: IFF_UP }, {});
  }

  /**
   * Equivalent to: `bridge link set dev INDEX state STATE` (BR_STATE_*; the bridge must not run
   * kernel STP). Takes effect at once, without the RCU waits of taking a device down.
   */
  setBridgePortState(index: number, state: number): void {
    this.#sock.request(
      R.RTM_SETLINK,
      0,
      encodeLinkBody({ ifi: ifInfoMsg({ family: AF_BRIDGE, index }), attrs: { protinfoState: state } }),
    );
  }

  /**
   * Equivalent to: `ip link set dev INDEX type bridge_slave hairpin on|off`: whether the bridge may
   * send a frame back out of the port it came in on. The link must already be a bridge port.
   */
  setBridgePortHairpin(index: number, on: boolean): void {
    const mode: RtAttr = { type: IFLA_BRPORT_MODE, value: Uint8Array.of(on ? 1 : 0) };
    // Slave data is applied by RTM_NEWLINK on an existing link (no NLM_F_CREATE); RTM_SETLINK ignores it.
    const attrs: LinkAttributes = { linkinfo: { slaveKind: 'bridge', slaveData: [mode] } };
    this.#sock.request(R.RTM_NEWLINK, 0, encodeLinkBody({ ifi: ifInfoMsg({ index }), attrs }));
  }

  /** Equivalent to: `bridge link set dev INDEX flood on|off` (unknown unicast; see bridge-port.ts). */
  setBridgePortUnicastFlood(index: number, on: boolean): void {
    BridgePortOps.setUnicastFlood(this.#sock, index, on);
  }

  /** Equivalent to: `bridge fdb replace MAC dev INDEX master static [vlan VID]`. */
  setBridgeStaticFdb(spec: StaticFdbSpec): void {
    BridgePortOps.setStaticFdb(this.#sock, spec);
  }

  /** Equivalent to: `bridge fdb del MAC dev INDEX master [vlan VID]`. False when there is no such entry. */
  deleteBridgeFdb(spec: StaticFdbSpec): boolean {
    return BridgePortOps.deleteMasterFdb(this.#sock, spec);
  }

  /** Equivalent to: `bridge fdb show brport INDEX`. */
  bridgePortFdb(index: number): FdbEntry[] {
    return BridgePortOps.portFdb(this.#sock, index);
  }

  /** Equivalent to: `ip link set dev INDEX type bridge vlan_filtering 0|1`. */
  setBridgeVlanFiltering(index: number, on: boolean): void {
    BridgeVlanOps.setVlanFiltering(this.#sock, index, on);
  }

  /** Equivalent to: `ip link set dev INDEX type bridge no_linklocal_learn 1` (see bridge-vlan.ts). */
  setBridgeNoLinklocalLearn(index: number): void {
    BridgeVlanOps.setNoLinklocalLearn(this.#sock, index);
  }

  /** Equivalent to: `bridge vlan add dev INDEX vid VID [pvid] [untagged] [self]`. */
  addBridgeVlan(index: number, vid: number, options?: BridgeVlanOptions): void {
    BridgeVlanOps.addVlan(this.#sock, index, vid, options);
  }

  /** Equivalent to: `bridge vlan del dev INDEX vid VID [self]`; idempotent. */
  deleteBridgeVlan(index: number, vid: number, options?: { self?: boolean }): void {
    BridgeVlanOps.deleteVlan(this.#sock, index, vid, options);
  }

  /** Equivalent to: `bridge vlan show dev INDEX`. */
  bridgeVlans(index: number): BridgeVlan[] {
    return BridgeVlanOps.vlans(this.#sock, index);
  }

  /** Equivalent to: `bridge vlan show`: every bridge port's VLANs by interface index, in one dump. */
  allBridgeVlans(): Map<number, BridgeVlan[]> {
    return BridgeVlanOps.allVlans(this.#sock);
  }

  /** Equivalent to: `ip link set dev INDEX master MASTER` (`nomaster` when masterIndex is 0). */
  setMaster(index: number, masterIndex: number): void {
    this.#setLink(index, {}, { master: masterIndex });
  }

  /** Equivalent to: `ip link set dev INDEX mtu MTU`. */
  setMtu(index: number, mtu: number): void {
    this.#setLink(index, {}, { mtu });
  }

  /** Equivalent to: `ip link set dev INDEX address MAC`. */
  setMac(index: number, mac: string): void {
    this.#setLink(index, {}, { address: parseMac(mac) });
  }

  #setLink(index: number, flags: { flags?: number; change?: number }, attrs: LinkAttributes): void {
    this.#sock.request(R.RTM_SETLINK, 0, encodeLinkBody({ ifi: ifInfoMsg({ index, ...flags }), attrs }));
  }

  /** Equivalent to: `ip link del dev INDEX`. False when the link does not exist (ENODEV). */
  deleteLink(index: number): boolean {
    return this.#deleteLink(index, {});
  }

  /** Equivalent to: `ip link del dev NAME`. False when the link does not exist (ENODEV). */
  deleteLinkByName(name: string): boolean {
    return this.#deleteLink(0, { ifname: name });
  }

  /**
   * `deleteLinkByName` with the kernel's work on a worker thread: unregistering a device waits for
   * RCU (10-30 ms for a veth here), which would otherwise stall every other request of the agent.
   */
  async deleteLinkByNameAsync(name: string): Promise<boolean> {
    return this.#deleteLinkAsync(0, { ifname: name });
  }

  /**
   * `deleteLinkByNameAsync` by index: the very link that was listed, never a newer one that took its
   * name since. Equivalent to: `ip link del dev INDEX`.
   */
  async deleteLinkAsync(index: number): Promise<boolean> {
    return this.#deleteLinkAsync(index, {});
  }

  async #deleteLinkAsync(index: number, attrs: LinkAttributes): Promise<boolean> {
    const deletion = this.#requestAsync(
      R.RTM_DELLINK,
      0,
      encodeLinkBody({ ifi: ifInfoMsg({ index }), attrs }),
    );
    const settled = deletion.then(
      () => undefined,
      () => undefined,
    );
    this.#deletions.add(settled);
    void settled.then(() => this.#deletions.delete(settled));
    try {
      await deletion;
      return true;
    } catch (err) {
      if (isErrno(err, constants.errno.ENODEV)) return false;
      throw err;
    }
  }

  /**
   * Resolves once every `deleteLinkByNameAsync` started so far has finished, whatever its outcome:
   * e.g. before deciding that an interface which a deletion in flight may still remove is in the way.
   */
  async deletionsSettled(): Promise<void> {
    await Promise.all([...this.#deletions]);
  }

  #deleteLink(index: number, attrs: LinkAttributes): boolean {
    try {
      this.#sock.request(R.RTM_DELLINK, 0, encodeLinkBody({ ifi: ifInfoMsg({ index }), attrs }));
      return true;
    } catch (err) {
      if (isErrno(err, constants.errno.ENODEV)) return false;
      throw err;
    }
  }

  // Addresses

  /** Equivalent to: `ip addr add ADDRESS/PREFIX dev INDEX [nodad] [noprefixroute]`. */
  addAddress(index: number, spec: AddressSpec, options: AddressOptions = {}): void {
    const flags = (options.nodad ? IFA_F_NODAD : 0) | (options.noprefixroute ? IFA_F_NOPREFIXROUTE : 0);
    this.#sock.request(R.RTM_NEWADDR, CREATE, addressBody(index, spec, flags));
  }

  /** Equivalent to: `ip addr del ADDRESS/PREFIX dev INDEX`. False when it is not there (EADDRNOTAVAIL). */
  deleteAddress(index: number, spec: AddressSpec): boolean {
    try {
      this.#sock.request(R.RTM_DELADDR, 0, addressBody(index, spec, 0));
      return true;
    } catch (err) {
      if (isErrno(err, constants.errno.EADDRNOTAVAIL)) return false;
      throw err;
    }
  }

  /** Equivalent to: `ip [-4|-6] addr show [dev INDEX]`. */
  addresses(filter: { index?: number; family?: number } = {}): Addr[] {
    const request = encodeAddrBody({
      ifa: { family: filter.family ?? AF_UNSPEC, prefixlen: 0, flags: 0, scope: 0, index: 0 },
      attrs: {},
    });
    return this.#sock
      .dump(R.RTM_GETADDR, request)
      .filter((m) => m.header.type === R.RTM_NEWADDR)
      .map((m) => addrFromBody(decodeAddrBody(m.payload)))
      .filter((a) => filter.index === undefined || a.index === filter.index)
      .filter((a) => filter.family === undefined || a.family === filter.family);
  }

  // Routes

  /** Equivalent to: `ip route add DST|default [via GATEWAY [onlink]] dev OIF [metric P]` (main table). */
  addRoute(spec: RouteSpec): void {
    this.#sock.request(R.RTM_NEWROUTE, CREATE, routeBody(spec, false));
  }

  /** Equivalent to: `ip route del DST|default [via GATEWAY] dev OIF`. False when no route matches (ESRCH). */
  deleteRoute(spec: RouteSpec): boolean {
    try {
      this.#sock.request(R.RTM_DELROUTE, 0, routeBody(spec, true));
      return true;
    } catch (err) {
      if (isErrno(err, constants.errno.ESRCH)) return false;
      throw err;
    }
  }

  /** Equivalent to: `ip -4|-6 route show table main [dev OIF]`. */
  routes(filter: { family: number; oif?: number }): Route[] {
    const request = encodeRouteBody({ rtm: rtMsg({ family: filter.family }), attrs: {} });
    return this.#sock
      .dump(R.RTM_GETROUTE, request)
      .filter((m) => m.header.type === R.RTM_NEWROUTE)
      .map((m) => decodeRouteBody(m.payload))
      .filter((b) => (b.rtm.flags & R.RTM_F_CLONED) === 0)
      .map(routeFromBody)
      .filter((r) => r.table === R.RT_TABLE_MAIN && r.family === filter.family)
      .filter((r) => filter.oif === undefined || r.oif === filter.oif);
  }

  /**
   * Runs many requests with few syscalls: up to 128 per `sendmsg` and one ack wait per datagram
   * (`NetlinkSocket.requestBatch`), on the least busy async socket when the client has them (the
   * kernel's work then happens on a worker thread, never stalling the event loop), else on the
   * synchronous one. Build the requests with the `...Request` functions (`routeAddRequest`, ...).
   * Returns the refused requests; never throws for one of them.
   */
  async batch(requests: readonly BatchRequest[]): Promise<BatchFailure[]> {
    if (requests.length === 0) return [];
    if (this.#asyncSocks.length === 0) return this.#sock.requestBatch(requests, false);
    const slot = this.#asyncSocks.reduce((a, b) => (b.queued < a.queued ? b : a));
    slot.queued++;
    try {
      return await slot.sock.requestBatch(requests, true);
    } finally {
      slot.queued--;
    }
  }

  // Traffic control (tc-message.ts)

  /** Equivalent to: `tc qdisc add dev INDEX ingress`. False when the device has one already (EEXIST). */
  addIngressQdisc(index: number): boolean {
    try {
      this.#sock.request(R.RTM_NEWQDISC, CREATE, ingressQdiscBody(index));
      return true;
    } catch (err) {
      if (isErrno(err, constants.errno.EEXIST)) return false;
      throw err;
    }
  }

  /**
   * Equivalent to: `tc filter add dev INDEX ingress protocol all prio 1 u32 match u32 0 0 action mirred
   * egress redirect dev TARGET`. Needs the ingress qdisc (`addIngressQdisc`).
   */
  addIngressRedirect(index: number, target: number): void {
    this.#sock.request(R.RTM_NEWTFILTER, CREATE, ingressRedirectFilterBody(index, target));
  }

  /** Equivalent to: `tc filter show dev INDEX ingress`. Empty when the device has no ingress qdisc. */
  ingressFilters(index: number): TcFilter[] {
    try {
      return this.#sock
        .dump(R.RTM_GETTFILTER, ingressFilterDumpBody(index))
        .filter((m) => m.header.type === R.RTM_NEWTFILTER)
        .map((m) => decodeFilter(m.payload));
    } catch (err) {
      if (isErrno(err, constants.errno.EINVAL) || isErrno(err, constants.errno.ENOENT)) return [];
      throw err;
    }
  }

  /**
   * Equivalent to: `tc qdisc replace dev INDEX root handle 1: tbf rate R buffer B limit L` (tc-message.ts,
   * `rootTbfBody`): replaces whatever root qdisc the device has.
   */
  replaceRootTbf(index: number, params: TbfParams): void {
    this.#sock.request(R.RTM_NEWQDISC, CREATE_OR_REPLACE, rootTbfBody(index, params));
  }

  /** Equivalent to: `tc qdisc show dev INDEX`: the device's qdiscs (the default ones included). */
  qdiscs(index: number): TcQdisc[] {
    return this.#sock
      .dump(R.RTM_GETQDISC, qdiscDumpBody())
      .filter((m) => m.header.type === R.RTM_NEWQDISC)
      .map((m) => decodeQdisc(m.payload))
      .filter((q) => q.ifindex === index);
  }

  // Neighbours and forwarding database (neigh-ops.ts)

  /** Equivalent to: `ip neigh replace ADDRESS lladdr MAC dev INDEX nud permanent`. */
  setNeigh(spec: NeighSpec): void {
    NeighOps.setNeigh(this.#sock, spec);
  }

  /** Equivalent to: `ip neigh del ADDRESS dev INDEX`. False when there is no such entry (ENOENT). */
  deleteNeigh(spec: { index: number; address: string }): boolean {
    return NeighOps.deleteNeigh(this.#sock, spec);
  }

  /** Equivalent to: `ip [-4|-6] neigh show nud all [dev INDEX]`. */
  neighbours(filter: { index?: number; family?: number } = {}): Neigh[] {
    return NeighOps.neighbours(this.#sock, filter);
  }

  /** Equivalent to: `bridge fdb replace MAC dev INDEX dst IP self permanent`. */
  setFdb(spec: FdbSpec): void {
    NeighOps.setFdb(this.#sock, spec);
  }

  /** Equivalent to: `bridge fdb del MAC dev INDEX [dst IP] self`. False when the entry or that remote is absent. */
  deleteFdb(spec: { index: number; mac: string; dst?: string }): boolean {
    return NeighOps.deleteFdb(this.#sock, spec);
  }

  /** Equivalent to: `bridge fdb show [dev INDEX]`. */
  fdb(filter: { index?: number } = {}): FdbEntry[] {
    return NeighOps.fdb(this.#sock, filter);
  }
}

/** The request of `addRoute`, for a batch (EEXIST when a route to DST is there). */
export function routeAddRequest(spec: RouteSpec): BatchRequest {
  return { type: R.RTM_NEWROUTE, flags: CREATE, payload: routeBody(spec, false) };
}

/** The request of `deleteRoute`, for a batch (ESRCH when no route matches). */
export function routeDeleteRequest(spec: RouteSpec): BatchRequest {
  return { type: R.RTM_DELROUTE, flags: 0, payload: routeBody(spec, true) };
}

function addressBody(index: number, spec: AddressSpec, flags: number): Uint8Array {
  const ip = parseIpBytes(spec.address);
  const attrs = ip.family === 4 ? { local: ip.bytes, address: ip.bytes } : { address: ip.bytes };
  return encodeAddrBody({
    ifa: {
      family: inetFamily(ip.family),
      prefixlen: spec.prefixLength,
      flags: flags & 0xff,
      scope: R.RT_SCOPE_UNIVERSE,
      index,
    },
    attrs: flags === 0 ? attrs : { ...attrs, flags },
  });
}

/** A route destination `address/length`, host bits kept as `ip route` keeps them. */
function routeDst(text: string): { af: number; bytes: Uint8Array; prefixLength: number } {
  const p = parseAddressWithPrefix(text);
  if (p === undefined) throw new InternalError(`invalid route destination "${text}"`);
  return { af: inetFamily(p.family), bytes: new Uint8Array(ipValueToBytes(p)), prefixLength: p.length };
}

function routeBody(spec: RouteSpec, forDelete: boolean): Uint8Array {
  const dst = spec.dst === undefined ? undefined : routeDst(spec.dst);
  const gateway = spec.gateway === undefined ? undefined : parseIpBytes(spec.gateway);
  const family = spec.family ?? dst?.af ?? (gateway && inetFamily(gateway.family)) ?? AF_INET;
  for (const af of [dst?.af, gateway && inetFamily(gateway.family)]) {
    if (af !== undefined && af !== family) {
      throw new InternalError(`route ${spec.dst ?? 'default'} via ${spec.gateway}: mixed address families`);
    }
  }
  // `ip route` picks the scope the same way; a delete matches any scope with RT_SCOPE_NOWHERE.
  const defaultScope = family === AF_INET6 || gateway !== undefined ? R.RT_SCOPE_UNIVERSE : R.RT_SCOPE_LINK;
  const attrs: RouteAttributes = { oif: spec.oif };
  if (dst !== undefined && dst.prefixLength > 0) attrs.dst = dst.bytes;
  if (gateway !== undefined) attrs.gateway = gateway.bytes;
  if (spec.priority !== undefined) attrs.priority = spec.priority;
  const rtm = rtMsg({
    family,
    dstLen: dst?.prefixLength ?? 0,
    table: R.RT_TABLE_MAIN,
    protocol: forDelete ? R.RTPROT_UNSPEC : (spec.protocol ?? R.RTPROT_BOOT),
    scope: forDelete ? R.RT_SCOPE_NOWHERE : (spec.scope ?? defaultScope),
    type: forDelete ? R.RTN_UNSPEC : R.RTN_UNICAST,
    flags: spec.onlink ? R.RTNH_F_ONLINK : 0,
  });
  return encodeRouteBody({ rtm, attrs });
}
