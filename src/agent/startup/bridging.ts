/**
 * Bridging mode (`bridging: {uplink: eth0}`): the node's uplink becomes a port of the pod bridge, so
 * pool pods sit on the underlay at L2. The node's identity moves with it: its addresses, its MAC and
 * its routes go to the bridge's own interface (the Linux bridge itself, or OVS's gateway port), so the
 * node stays reachable, and every ARP the node sends for its IP still carries the uplink's MAC (I5 and
 * failure 2 in docs/architecture.md). A clean stop moves everything back.
 *
 * What was moved is written to `stateDir/bridging.json` (durably) before anything changes: an agent
 * killed while the uplink is moved finds it at the next start and restores first.
 */
import {
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { DatapathError, InvalidConfigError } from '../../base/errors.js';
import type { Datapath } from '../../datapath/datapath.js';
import { AF_INET, AF_INET6, KernelError } from '../../kernel/libc.js';
import type { Rtnetlink } from '../../kernel/netlink/rtnetlink.js';
import type { Route } from '../../kernel/netlink/types.js';
import type { Logger } from '../log.js';

const RTPROT_KERNEL = 2;
const RTN_UNICAST = 1;
const RT_SCOPE_UNIVERSE = 0;
const EEXIST = 17;

export interface BridgingSettings {
  uplink: string;
}

interface SavedAddress {
  family: number;
  address: string;
  prefixLength: number;
}

interface SavedRoute {
  family: number;
  dst?: string;
  gateway?: string;
  priority?: number;
  scope: number;
  protocol: number;
}

/** What `bridging.json` holds: enough to put the uplink back exactly. */
interface SavedState {
  uplink: string;
  uplinkMac: string;
  /** The bridge interface's own MAC before it took the uplink's. */
  targetMac: string;
  target: string;
  addresses: SavedAddress[];
  routes: SavedRoute[];
}

export interface BridgingOptions {
  nl: Rtnetlink;
  settings: BridgingSettings;
  /** The interface that takes the node's identity: the Linux bridge, or OVS's gateway port. */
  target: string;
  datapath: Datapath;
  stateDir: string;
  log: Logger;
}

function movable(route: Route): boolean {
  // Prefix routes of the addresses come back by themselves; IPv6 link-local and multicast belong to the link.
  if (route.protocol === RTPROT_KERNEL || route.type !== RTN_UNICAST) return false;
  return !(route.family === AF_INET6 && route.dst?.toLowerCase().startsWith('fe80:'));
}

/** Writes `path` whole or not at all, creating its directory (a first start may not have one yet). */
function writeDurably(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.tmp`;
  const fd = openSync(tmp, 'w', 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
}

/** What a previous run left in `stateDir/bridging.json` (the uplink still moved), if anything. */
function readSavedState(stateDir: string): SavedState | undefined {
  const file = join(stateDir, 'bridging.json');
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as SavedState) : undefined;
}

/**
 * The uplink's first IPv4 (else IPv6) address as a previous run saved it, when that run left the
 * uplink moved (killed without a clean stop): the uplink itself then has no address to read.
 */
export function savedUplinkIp(stateDir: string, uplink: string): string | undefined {
  const s = readSavedState(stateDir);
  if (s?.uplink !== uplink) return undefined;
  return (s.addresses.find((a) => a.family === AF_INET) ?? s.addresses[0])?.address;
}

export class UplinkBridging {
  readonly #o: BridgingOptions;
  readonly #stateFile: string;
  #state: SavedState | undefined;

  private constructor(o: BridgingOptions) {
    this.#o = o;
    this.#stateFile = join(o.stateDir, 'bridging.json');
  }

  /** Moves the uplink into the bridge; returns the index of the interface that now holds the node's IP. */
  static async attach(o: BridgingOptions): Promise<{ bridging: UplinkBridging; index: number }> {
    const b = new UplinkBridging(o);
    b.#state = readSavedState(o.stateDir);
    if (b.#state) {
      o.log.warn('uplink still moved by a previous run: restoring it first', { uplink: b.#state.uplink });
      await b.restore();
    }
    try {
      const index = await b.#move();
      return { bridging: b, index };
    } catch (err) {
      // What was moved so far is in bridging.json: put it back before reporting the failure.
      await b.restore().catch((e: unknown) => o.log.error('restoring the uplink failed', { err: String(e) }));
      throw err;
    }
  }

  /**
   * An agent started without `bridging` after a run that died with the uplink moved: puts the uplink
   * back (from `stateDir/bridging.json`), since nothing else would.
   */
  static async restoreLeftover(o: Omit<BridgingOptions, 'settings'>): Promise<void> {
    const state = readSavedState(o.stateDir);
    if (!state) return;
    o.log.warn('bridging is off, but a previous run left the uplink moved: restoring it', {
      uplink: state.uplink,
    });
    const b = new UplinkBridging({ ...o, settings: { uplink: state.uplink } });
    b.#state = state;
    await b.restore();
  }

  /** The uplink's MAC: the node's MAC on the underlay, now also the bridge interface's. */
  get uplinkMac(): string {
    return this.#state?.uplinkMac ?? '';
  }

  async #move(): Promise<number> {
    const { nl, settings, target, datapath, log } = this.#o;
    const up = nl.linkByName(settings.uplink);
    if (!up?.mac)
      throw new InvalidConfigError(`agent config: bridging.uplink: no interface ${settings.uplink}`);
    const tgt = nl.linkByName(target);
    if (!tgt?.mac) throw new DatapathError(`bridging: the bridge interface ${target} does not exist`);
    const addresses = nl
      .addresses({ index: up.index })
      .filter((a) => a.family === AF_INET || a.scope === RT_SCOPE_UNIVERSE)
      .map((a) => ({ family: a.family, address: a.address, prefixLength: a.prefixLength }));
    if (addresses.length === 0)
      throw new InvalidConfigError(
        `agent config: bridging.uplink: ${settings.uplink} has no address to move`,
      );
    const routes = [AF_INET, AF_INET6]
      .flatMap((family) => nl.routes({ family, oif: up.index }))
      .filter(movable)
      .map((r) => ({
        family: r.family,
        scope: r.scope,
        protocol: r.protocol,
        ...(r.dst === undefined ? {} : { dst: r.dst }),
        ...(r.gateway === undefined ? {} : { gateway: r.gateway }),
        ...(r.priority === undefined ? {} : { priority: r.priority }),
      }));
    const state: SavedState = {
      uplink: settings.uplink,
      uplinkMac: up.mac,
      target,
      targetMac: tgt.mac,
      addresses,
      routes,
    };
    writeDurably(this.#stateFile, JSON.stringify(state));
    this.#state = state;
    const started = performance.now();
    // The bridge interface answers with the uplink's MAC before the uplink joins: frames that arrive
    // through the bridge for the node's MAC are then the bridge interface's own from the first one.
    await datapath.attachUplink({
      ifname: up.name,
      index: up.index,
      mac: up.mac,
      ips: addresses.map((a) => a.address),
    });
    for (const a of addresses) addIfMissing(nl, tgt.index, a);
    for (const a of addresses) nl.deleteAddress(up.index, a);
    for (const r of routes) addRoute(nl, tgt.index, r);
    log.info('uplink moved into the bridge', {
      uplink: up.name,
      to: target,
      mac: up.mac,
      addresses: addresses.map((a) => `${a.address}/${a.prefixLength}`),
      routes: routes.length,
      ms: Math.round(performance.now() - started),
    });
    return tgt.index;
  }

  /** Puts the uplink back as it was: out of the bridge, with its addresses and routes. Idempotent. */
  async restore(): Promise<void> {
    const s = this.#state;
    if (!s) return;
    const { nl, datapath, log } = this.#o;
    const up = nl.linkByName(s.uplink);
    const tgt = nl.linkByName(s.target);
    const started = performance.now();
    if (up) {
      await datapath.detachUplink({ ifname: s.uplink, index: up.index, targetMac: s.targetMac });
      nl.setLinkUp(up.index);
      for (const a of s.addresses) addIfMissing(nl, up.index, a);
    }
    if (tgt) for (const a of s.addresses) nl.deleteAddress(tgt.index, a);
    if (up) for (const r of s.routes) addRoute(nl, up.index, r);
    rmSync(this.#stateFile, { force: true });
    this.#state = undefined;
    log.info('uplink restored', { uplink: s.uplink, ms: Math.round(performance.now() - started) });
  }
}

function addIfMissing(nl: Rtnetlink, index: number, a: SavedAddress): void {
  const present = nl
    .addresses({ index })
    .some((x) => x.address === a.address && x.prefixLength === a.prefixLength);
  if (!present)
    nl.addAddress(
      index,
      { address: a.address, prefixLength: a.prefixLength },
      { nodad: a.family === AF_INET6 },
    );
}

function addRoute(nl: Rtnetlink, oif: number, r: SavedRoute): void {
  try {
    nl.addRoute({
      family: r.family,
      oif,
      protocol: r.protocol,
      scope: r.scope,
      ...(r.dst === undefined ? {} : { dst: r.dst }),
      ...(r.gateway === undefined ? {} : { gateway: r.gateway }),
      ...(r.priority === undefined ? {} : { priority: r.priority }),
    });
  } catch (err) {
    if (!(err instanceof KernelError && err.errno === EEXIST)) throw err;
  }
}
