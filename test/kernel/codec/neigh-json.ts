/**
 * `ip -j neigh` and `bridge -j fdb show` as reference decoders: maps podwire's Neigh/FdbEntry and the
 * tools' JSON entries to one comparable line each. Pure; importing it has no side effects.
 */
import type { FdbEntry, Link, Neigh } from '../../../src/kernel/netlink/types.js';
import * as N from '../../../src/kernel/netlink/uapi/neighbour.js';

// Order of the bits as iproute2's nud_state_n2a prints them.
const NUD_NAMES: [number, string][] = [
  [N.NUD_INCOMPLETE, 'INCOMPLETE'],
  [N.NUD_REACHABLE, 'REACHABLE'],
  [N.NUD_STALE, 'STALE'],
  [N.NUD_DELAY, 'DELAY'],
  [N.NUD_PROBE, 'PROBE'],
  [N.NUD_FAILED, 'FAILED'],
  [N.NUD_NOARP, 'NOARP'],
  [N.NUD_PERMANENT, 'PERMANENT'],
];

const FDB_FLAGS: [number, string][] = [
  [N.NTF_SELF, 'self'],
  [N.NTF_ROUTER, 'router'],
  [N.NTF_EXT_LEARNED, 'extern_learn'],
  [N.NTF_OFFLOADED, 'offload'],
  [N.NTF_MASTER, 'master'],
  [N.NTF_STICKY, 'sticky'],
];

function linkName(links: readonly Link[], index: number): string {
  return links.find((l) => l.index === index)?.name ?? `if${index}`;
}

/** An entry of `ip -j neigh show`. */
export interface IpNeigh {
  dst: string;
  dev: string;
  lladdr?: string;
  state: string[];
}

export function neighKey(n: Neigh, links: readonly Link[]): string {
  const state = n.state === 0 ? ['NONE'] : NUD_NAMES.filter(([bit]) => n.state & bit).map(([, name]) => name);
  return `${n.address} dev ${linkName(links, n.index)} lladdr ${n.mac ?? '-'} ${state.join(',')}`;
}

export function ipNeighKey(e: IpNeigh): string {
  return `${e.dst} dev ${e.dev} lladdr ${e.lladdr ?? '-'} ${e.state.join(',')}`;
}

/** An entry of `bridge -j fdb show`. */
export interface IpFdb {
  mac: string;
  /** Left out when the listing was filtered with `dev`. */
  ifname?: string;
  dst?: string;
  flags?: string[];
  state?: string;
  master?: string;
  vlan?: number;
}

export function fdbKey(e: FdbEntry, links: readonly Link[]): string {
  const flags = FDB_FLAGS.filter(([bit]) => e.flags & bit).map(([, n]) => n);
  const state = e.state & N.NUD_PERMANENT ? 'permanent' : e.state & N.NUD_NOARP ? 'static' : `${e.state}`;
  const master = e.master === undefined ? '-' : linkName(links, e.master);
  const where = `dst ${e.dst ?? '-'} master ${master} vlan ${e.vlan ?? '-'}`;
  return `${e.mac} dev ${linkName(links, e.index)} ${where} ${flags.sort().join(',')} ${state}`;
}

/** `dev`: the device a `bridge fdb show dev DEV` listing was filtered on. */
export function ipFdbKey(e: IpFdb, dev?: string): string {
  const flags = [...(e.flags ?? [])].sort().join(',');
  const where = `dst ${e.dst ?? '-'} master ${e.master ?? '-'} vlan ${e.vlan ?? '-'}`;
  return `${e.mac} dev ${e.ifname ?? dev} ${where} ${flags} ${e.state ?? ''}`;
}
