/**
 * Flows as text, in the syntax of ovs-ofctl(8) "Flow Syntax": parsing what `dump-flows` prints, and
 * a canonical key (table, priority, cookie, match tokens in sorted order, actions) under which a flow
 * podwire generated and the same flow read back from the switch compare equal.
 */
import { DecodeError } from '../../base/errors.js';

export interface FlowEntry {
  table: number;
  priority: number;
  cookie: bigint;
  /** Match fields as written, e.g. ['arp', 'in_port=2', 'arp_spa=10.0.0.2']. */
  match: string[];
  actions: string;
  /** Statistics; undefined for a flow that was not read from a switch. */
  packets?: number;
  bytes?: number;
}

/** Fields dump-flows prints that describe a flow's state, not what it matches. */
const STATS = new Set([
  'duration',
  'n_packets',
  'n_bytes',
  'idle_age',
  'hard_age',
  'idle_timeout',
  'hard_timeout',
  'importance',
  'reset_counts',
  'send_flow_rem',
  'check_overlap',
  'no_packet_counts',
  'no_byte_counts',
]);

/** OpenFlow's default priority: dump-flows leaves it out. */
const DEFAULT_PRIORITY = 32768;

/**
 * Parses one flow: a line of `ovs-ofctl dump-flows` output, or a flow in add-flows syntax.
 * Throws ERR_DECODE for a line without `actions=`.
 */
export function parseFlow(line: string): FlowEntry {
  const at = line.indexOf(' actions=');
  const actionsAt = at >= 0 ? at + 1 : line.startsWith('actions=') ? 0 : -1;
  if (actionsAt < 0) throw new DecodeError(`not a flow: ${line.trim()}`);
  const head = line.slice(0, actionsAt);
  const actions = line.slice(actionsAt + 'actions='.length).trim();
  const entry: FlowEntry = { table: 0, priority: DEFAULT_PRIORITY, cookie: 0n, match: [], actions };
  for (const raw of head.split(',')) {
    const token = raw.trim();
    if (token === '') continue;
    const eq = token.indexOf('=');
    const key = eq < 0 ? token : token.slice(0, eq);
    const value = eq < 0 ? '' : token.slice(eq + 1);
    if (key === 'table') entry.table = Number(value);
    else if (key === 'priority') entry.priority = Number(value);
    else if (key === 'cookie') entry.cookie = BigInt(value);
    else if (key === 'n_packets') entry.packets = Number(value);
    else if (key === 'n_bytes') entry.bytes = Number(value);
    else if (!STATS.has(key)) entry.match.push(token);
  }
  return entry;
}

/** Parses `dump-flows` output, skipping its reply header line(s). */
export function parseDump(text: string): FlowEntry[] {
  return text
    .split('\n')
    .filter((l) => l.includes('actions='))
    .map(parseFlow);
}

/** A text under which two descriptions of the same flow are equal, statistics aside. */
export function flowKey(f: FlowEntry): string {
  const match = [...f.match].sort().join(',');
  return `table=${f.table},priority=${f.priority},cookie=0x${f.cookie.toString(16)},${match} actions=${f.actions}`;
}

/**
 * Compares two flow sets. Returns the keys only in `want` (missing) and only in `have` (unexpected);
 * both empty means the switch holds exactly the wanted flows.
 */
export function diffFlows(want: FlowEntry[], have: FlowEntry[]): { missing: string[]; unexpected: string[] } {
  const w = new Set(want.map(flowKey));
  const h = new Set(have.map(flowKey));
  return {
    missing: [...w].filter((k) => !h.has(k)),
    unexpected: [...h].filter((k) => !w.has(k)),
  };
}
