/**
 * `ip -j` as the reference decoder: maps podwire's Link/Addr/Route and `ip -j` entries to one common
 * shape so tests can compare them. The mapping follows what iproute2 prints and what it leaves out
 * (proto boot, scope global, unicast type). Pure; importing it has no side effects.
 */
import { AF_INET, AF_INET6 } from '../../../src/kernel/libc.js';
import type { Addr, Link, Route } from '../../../src/kernel/netlink/types.js';
import * as F from '../../../src/kernel/netlink/uapi/if.js';
import * as R from '../../../src/kernel/netlink/uapi/rtnetlink.js';

// Order as in iproute2's print_link_flags; IFF_RUNNING is never printed.
const FLAG_NAMES: [number, string][] = [
  [F.IFF_LOOPBACK, 'LOOPBACK'],
  [F.IFF_BROADCAST, 'BROADCAST'],
  [F.IFF_POINTOPOINT, 'POINTOPOINT'],
  [F.IFF_MULTICAST, 'MULTICAST'],
  [F.IFF_NOARP, 'NOARP'],
  [F.IFF_ALLMULTI, 'ALLMULTI'],
  [F.IFF_PROMISC, 'PROMISC'],
  [F.IFF_MASTER, 'MASTER'],
  [F.IFF_SLAVE, 'SLAVE'],
  [F.IFF_DEBUG, 'DEBUG'],
  [F.IFF_DYNAMIC, 'DYNAMIC'],
  [F.IFF_AUTOMEDIA, 'AUTOMEDIA'],
  [F.IFF_PORTSEL, 'PORTSEL'],
  [F.IFF_NOTRAILERS, 'NOTRAILERS'],
  [F.IFF_UP, 'UP'],
  [F.IFF_LOWER_UP, 'LOWER_UP'],
  [F.IFF_DORMANT, 'DORMANT'],
  [F.IFF_ECHO, 'ECHO'],
];

export function ipLinkFlags(flags: number): string[] {
  const out = (flags & F.IFF_UP) !== 0 && (flags & F.IFF_RUNNING) === 0 ? ['NO-CARRIER'] : [];
  for (const [bit, name] of FLAG_NAMES) if ((flags & bit) !== 0) out.push(name);
  return out;
}

export interface LinkView {
  ifindex: number;
  ifname: string;
  flags: string[];
  mtu: number;
  master?: string;
  operstate?: string;
  address?: string;
  kind?: string;
}

export function linkView(link: Link, all: readonly Link[]): LinkView {
  const v: LinkView = {
    ifindex: link.index,
    ifname: link.name,
    flags: ipLinkFlags(link.flags),
    mtu: link.mtu,
  };
  const master = all.find((l) => l.index === link.masterIndex);
  if (master !== undefined) v.master = master.name;
  if (link.operstate !== undefined) v.operstate = link.operstate;
  if (link.mac !== undefined) v.address = link.mac;
  if (link.kind !== undefined) v.kind = link.kind;
  return v;
}

/** Reads an entry of `ip -j -d link show`. "M-DOWN" is left out: ip derives it from another link. */
export function ipLinkView(entry: Record<string, unknown>): LinkView {
  const v: LinkView = {
    ifindex: entry.ifindex as number,
    ifname: entry.ifname as string,
    flags: (entry.flags as string[]).filter((f) => f !== 'M-DOWN'),
    mtu: entry.mtu as number,
  };
  if (typeof entry.master === 'string') v.master = entry.master;
  if (typeof entry.operstate === 'string') v.operstate = entry.operstate;
  if (typeof entry.address === 'string') v.address = entry.address;
  const kind = (entry.linkinfo as { info_kind?: string } | undefined)?.info_kind;
  if (kind !== undefined) v.kind = kind;
  return v;
}

const SCOPE_NAMES = new Map<number, string>([
  [R.RT_SCOPE_UNIVERSE, 'global'],
  [R.RT_SCOPE_SITE, 'site'],
  [R.RT_SCOPE_LINK, 'link'],
  [R.RT_SCOPE_HOST, 'host'],
  [R.RT_SCOPE_NOWHERE, 'nowhere'],
]);

const PROTOCOL_NAMES = new Map<number, string>([
  [R.RTPROT_REDIRECT, 'redirect'],
  [R.RTPROT_KERNEL, 'kernel'],
  [R.RTPROT_BOOT, 'boot'],
  [R.RTPROT_STATIC, 'static'],
  [R.RTPROT_RA, 'ra'],
]);

function familyName(family: number): string {
  return family === AF_INET ? 'inet' : family === AF_INET6 ? 'inet6' : `${family}`;
}

/** One line per address: `ifindex family local/prefixlen scope`. */
export function addrKey(a: Addr): string {
  return `${a.index} ${familyName(a.family)} ${a.address}/${a.prefixLength} ${SCOPE_NAMES.get(a.scope) ?? a.scope}`;
}

/** The same keys from `ip -j addr show`. */
export function ipAddrKeys(entries: Record<string, unknown>[]): string[] {
  const out: string[] = [];
  for (const e of entries) {
    for (const a of e.addr_info as Record<string, unknown>[]) {
      out.push(`${e.ifindex} ${a.family} ${a.local}/${a.prefixlen} ${a.scope}`);
    }
  }
  return out.sort();
}

export interface RouteView {
  dst: string;
  gateway?: string;
  dev?: string;
  protocol?: string;
  scope?: string;
  metric?: number;
  prefsrc?: string;
}

/** The route as `ip -j route show` prints it: host routes without /32 or /128, defaults as "default". */
export function routeView(r: Route, all: readonly Link[]): RouteView {
  let dst = r.dst ?? 'default';
  const hostLen = r.family === AF_INET ? '/32' : '/128';
  if (dst.endsWith(hostLen)) dst = dst.slice(0, -hostLen.length);
  const v: RouteView = { dst };
  if (r.gateway !== undefined) v.gateway = r.gateway;
  const dev = all.find((l) => l.index === r.oif);
  if (dev !== undefined) v.dev = dev.name;
  if (r.protocol !== R.RTPROT_BOOT) v.protocol = PROTOCOL_NAMES.get(r.protocol) ?? `${r.protocol}`;
  if (r.scope !== R.RT_SCOPE_UNIVERSE) v.scope = SCOPE_NAMES.get(r.scope) ?? `${r.scope}`;
  if (r.priority !== undefined) v.metric = r.priority;
  if (r.prefsrc !== undefined) v.prefsrc = r.prefsrc;
  return v;
}

export function ipRouteView(entry: Record<string, unknown>): RouteView {
  const v: RouteView = { dst: entry.dst as string };
  for (const key of ['gateway', 'dev', 'protocol', 'scope', 'prefsrc'] as const) {
    if (typeof entry[key] === 'string') v[key] = entry[key] as string;
  }
  if (typeof entry.metric === 'number') v.metric = entry.metric;
  return v;
}

export function byDst(a: RouteView, b: RouteView): number {
  return a.dst < b.dst ? -1 : a.dst > b.dst ? 1 : 0;
}
