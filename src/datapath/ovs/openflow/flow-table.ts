/**
 * One bridge's flow table, as the OVS datapath programs it: flows in the text form pipeline.ts writes
 * them, sent over one persistent OpenFlow 1.3 connection to the bridge's management socket
 * (connection.ts), every multi-flow change as one atomic bundle. A second, OpenFlow 1.0 connection
 * is opened only for the ports' no-flood bit, which OpenFlow 1.1 dropped from the protocol
 * (port-mod-of10.ts). No process is spawned: this replaces `ovs-ofctl` in ADD, DEL and CHECK.
 */

import type { OpenflowConnection, OpenflowConnectionOptions, SwitchFeatures } from './connection.js';
import { OpenflowConnection as Connection } from './connection.js';
import type { OutgoingMessage } from './exchange.js';
import type { Flow } from './flow.js';
import { diffFlowSets, flowIdentityKey } from './flow-key.js';
import { COOKIE_MASK_ALL, encodeFlowMod, flowAdd, flowDeleteByCookie, flowDeleteStrict } from './flow-mod.js';
import { parseFlowText } from './flow-parse.js';
import { decodeFlowStatsReply, encodeFlowStatsRequest, type FlowStats, OFPMP_FLOW } from './flow-stats.js';
import { OFP10_VERSION, OFPT13 } from './header.js';
import { noFlood, setNoFlood } from './port-mod-of10.js';
import {
  decodePortStatsReply,
  encodePortStatsRequest,
  OFPMP_PORT_STATS,
  type PortStats,
} from './port-stats.js';

/** A change: every flow with one of `deleteCookies` goes, then `add` comes. */
export interface FlowChange {
  deleteCookies?: readonly bigint[];
  add?: readonly string[];
  /**
   * One atomic bundle (the default: two waits, see exchange.ts), or, when false, the flow mods
   * and one barrier in a single write (1 round trip): in order, each applied as it arrives, the
   * first failure reported. For flows nothing can reach yet, e.g. those of a port whose link is down.
   */
  atomic?: boolean;
}

/** What `replace` changed: flows added (or changed) and flows deleted. */
export interface ReplaceOutcome {
  added: number;
  deleted: number;
}

/** How long a no-flood call waits for its OpenFlow 1.0 connection to come up. */
const NO_FLOOD_CONNECT_MS = 5000;

function flowMod(body: Buffer): OutgoingMessage {
  return { type: OFPT13.FLOW_MOD, body };
}

/** `flows` parsed; each one's cookie must lie within `cookie` under `mask`. */
function parseMasked(flows: readonly string[], cookie: bigint, mask: bigint): Flow[] {
  const parsed = flows.map(parseFlowText);
  const stray = parsed.find((f) => (f.cookie & mask) !== (cookie & mask));
  if (stray)
    throw new TypeError(
      `flow cookie 0x${stray.cookie.toString(16)} is outside 0x${cookie.toString(16)}/0x${mask.toString(16)}`,
    );
  return parsed;
}

export class FlowTable {
  readonly target: string;
  readonly #of13: OpenflowConnection;
  readonly #options: Omit<OpenflowConnectionOptions, 'target' | 'version'>;
  /** The OpenFlow 1.0 connection for no-flood, opened on first use. */
  #of10: OpenflowConnection | undefined;

  /** Starts connecting in the background (see connection.ts); `waitUp` waits for the switch. */
  constructor(target: string, options: Omit<OpenflowConnectionOptions, 'target' | 'version'> = {}) {
    this.target = target;
    this.#options = options;
    this.#of13 = Connection.open({ ...options, target });
  }

  /** The OpenFlow 1.3 connection: its state, reconnect counters and up/down events. */
  get connection(): OpenflowConnection {
    return this.#of13;
  }

  waitUp(timeoutMs: number): Promise<SwitchFeatures> {
    return this.#of13.waitUp(timeoutMs);
  }

  /**
   * Applies `change`, atomically unless it says otherwise. Equivalent to: `ovs-ofctl --bundle
   * add-flows SWITCH -` fed `delete cookie=C/-1` lines, then the flows.
   */
  async apply(change: FlowChange): Promise<void> {
    const messages = [
      ...(change.deleteCookies ?? []).map((c) => flowMod(encodeFlowMod(flowDeleteByCookie(c)))),
      ...(change.add ?? []).map((text) => flowMod(encodeFlowMod(flowAdd(parseFlowText(text))))),
    ];
    if (messages.length === 0) return;
    if (messages.length === 1 || change.atomic === false) await this.#of13.transact(messages);
    else await this.#of13.bundle(messages);
  }

  /** Equivalent to: `ovs-ofctl del-flows SWITCH cookie=C/-1`. */
  async deleteCookie(cookie: bigint): Promise<void> {
    await this.#of13.transact([flowMod(encodeFlowMod(flowDeleteByCookie(cookie)))]);
  }

  /** The installed flows, all or those of one cookie. Equivalent to: `ovs-ofctl dump-flows SWITCH [cookie=C/-1]`. */
  async dump(cookie?: bigint): Promise<FlowStats[]> {
    const request = encodeFlowStatsRequest(
      cookie === undefined ? {} : { cookie, cookieMask: COOKIE_MASK_ALL },
    );
    return decodeFlowStatsReply(await this.#of13.multipart(OFPMP_FLOW, request));
  }

  /** The flows whose cookie matches `cookie` under `mask`. Equivalent to: `ovs-ofctl dump-flows SWITCH cookie=C/M`. */
  async dumpMasked(cookie: bigint, mask: bigint): Promise<FlowStats[]> {
    const request = encodeFlowStatsRequest({ cookie, cookieMask: mask });
    return decodeFlowStatsReply(await this.#of13.multipart(OFPMP_FLOW, request));
  }

  /**
   * Like `replace`, within the flows whose cookie matches `cookie` under `mask` (each of `flows` must
   * have such a cookie): those the switch holds beyond `flows` go, the missing come, in one atomic
   * bundle; flows of other cookies are not looked at. No change: nothing is sent.
   */
  async replaceMasked(flows: readonly string[], cookie: bigint, mask: bigint): Promise<ReplaceOutcome> {
    const want = parseMasked(flows, cookie, mask);
    const { missing, unexpected } = diffFlowSets<Flow, FlowStats>(want, await this.dumpMasked(cookie, mask));
    return this.#change(missing, unexpected);
  }

  /**
   * Adds `add` and deletes `remove` (texts; each flow's cookie within `cookie` under `mask`) in one
   * atomic bundle, without reading the switch: for a caller that knows what the switch holds (the
   * policy backend's last install). A flow of `add` with the identity of one of `remove` overwrites it.
   * Nothing to do: nothing is sent.
   */
  async changeMasked(
    add: readonly string[],
    remove: readonly string[],
    cookie: bigint,
    mask: bigint,
  ): Promise<ReplaceOutcome> {
    return this.#change(parseMasked(add, cookie, mask), parseMasked(remove, cookie, mask));
  }

  /** One bundle (a single message: a transaction) of `remove`'s deletes and `add`'s adds. */
  async #change(add: readonly Flow[], remove: readonly Flow[]): Promise<ReplaceOutcome> {
    // An ADD of the same table, priority and match replaces the entry: no delete needed for those.
    const overwritten = new Set(add.map(flowIdentityKey));
    const deletes = remove.filter((f) => !overwritten.has(flowIdentityKey(f)));
    const messages = [
      ...deletes.map((f) => flowMod(encodeFlowMod(flowDeleteStrict(f)))),
      ...add.map((f) => flowMod(encodeFlowMod(flowAdd(f)))),
    ];
    if (messages.length === 1) await this.#of13.transact(messages);
    else if (messages.length > 1) await this.#of13.bundle(messages);
    return { added: add.length, deleted: deletes.length };
  }

  /**
   * The switch's counters of one port (by OpenFlow number), or of all. Equivalent to: `ovs-ofctl -O
   * OpenFlow13 dump-ports SWITCH [PORT]`.
   */
  async portStats(portNo?: number): Promise<PortStats[]> {
    return decodePortStatsReply(await this.#of13.multipart(OFPMP_PORT_STATS, encodePortStatsRequest(portNo)));
  }

  /**
   * Makes the switch hold exactly `flows`, atomically: flows already there as wanted are left alone
   * (their counters keep counting), a wanted flow whose actions or cookie differ is overwritten,
   * others are added or deleted. Equivalent to: `ovs-ofctl --bundle replace-flows SWITCH -`.
   */
  async replace(
    flows: readonly string[],
    opts: { keep?: { cookie: bigint; mask: bigint } } = {},
  ): Promise<ReplaceOutcome> {
    const want = flows.map(parseFlowText);
    const keep = opts.keep;
    // `keep`: the flows of those cookies stay as the switch holds them (another writer's).
    const have = (await this.dump()).filter(
      (f) => !keep || (f.cookie & keep.mask) !== (keep.cookie & keep.mask),
    );
    const { missing, unexpected } = diffFlowSets<Flow, FlowStats>(want, have);
    return this.#change(missing, unexpected);
  }

  /** Equivalent to: `ovs-ofctl -O OpenFlow10 mod-port SWITCH PORT no-flood`. */
  async setNoFlood(port: string): Promise<void> {
    await setNoFlood(await this.#noFloodConnection(), port);
  }

  /** Whether FLOOD skips `port`. Equivalent to: `ovs-ofctl -O OpenFlow10 show SWITCH`, the port's config. */
  async noFlood(port: string): Promise<boolean> {
    return noFlood(await this.#noFloodConnection(), port);
  }

  /** Closes both connections; the switch keeps its flows. */
  async close(): Promise<void> {
    await Promise.all([this.#of13.close(), this.#of10?.close()]);
  }

  /** The OpenFlow 1.0 connection, once up: it is opened on first use, and the switch is up already. */
  async #noFloodConnection(): Promise<OpenflowConnection> {
    this.#of10 ??= Connection.open({ ...this.#options, target: this.target, version: OFP10_VERSION });
    await this.#of10.waitUp(NO_FLOOD_CONNECT_MS);
    return this.#of10;
  }
}
