/**
 * What the OVS datapath shows a person: its flows, table by table, each with its owner (the
 * pipeline or a pod) and counters. The one entrance `podwire flows` has into the OVS datapath; it
 * reads OVSDB and the bridge directly, so it works whether or not the agent is running.
 */
import type { FlowEntry } from './flow-text.js';
import { toFlowEntry } from './openflow/flow-format.js';
import { FlowTable } from './openflow/flow-table.js';
import type { PortStats } from './openflow/port-stats.js';
import { defaultOpenflowTarget } from './ovs-datapath.js';
import { OvsdbClient } from './ovsdb-client.js';
import { cookieText, isPodCookie, PIPELINE_COOKIE, podCookie, TABLE_NAMES } from './pipeline.js';
import { type PodRecord, parsePodExternalIds, podMatches } from './port-record.js';
import { VswitchDb } from './vswitch-db.js';

export type { PodRecord } from './port-record.js';

/** Where the switch is: the agent's `ovsdb` and `bridge` settings. */
export interface SwitchTarget {
  ovsdb: string;
  bridge: string;
}

export interface FlowRow {
  table: number;
  tableName: string | undefined;
  priority: number;
  cookie: string;
  /** Whether the cookie is a pod's. */
  pod: boolean;
  /** "pipeline", "pod NAMESPACE/NAME", or the cookie. */
  owner: string;
  match: string;
  actions: string;
  packets: number | undefined;
  bytes: number | undefined;
}

/**
 * A pod port's counters as the switch keeps them: `rx` is what the switch received on the port (what
 * the pod sent), `tx` what it sent out of it (what reached the pod). Numbers, not bigints: JSON.
 */
export interface PortCounters {
  rx: { packets: number; bytes: number; dropped: number; errors: number };
  tx: { packets: number; bytes: number; dropped: number; errors: number };
}

export interface PodFlows {
  port: string;
  ofport: number | undefined;
  record: PodRecord;
  cookie: string;
  flows: FlowRow[];
  /** Undefined when the port has no OpenFlow number (ovs-vswitchd could not open it). */
  counters: PortCounters | undefined;
}

interface PodPort {
  port: string;
  ofport: number | undefined;
  record: PodRecord;
  cookie: bigint;
}

/** Every pod port recorded in OVSDB, with the cookie of its flows. */
async function podPorts(target: SwitchTarget): Promise<PodPort[]> {
  const client = await OvsdbClient.connect(target.ovsdb);
  try {
    const rows = await new VswitchDb(client, target.bridge).ports();
    const out: PodPort[] = [];
    for (const row of rows) {
      const record = parsePodExternalIds(row.externalIds);
      if (record) out.push({ port: row.name, ofport: row.ofport, record, cookie: podCookie(row.name) });
    }
    return out;
  } finally {
    await client.close();
  }
}

function podLabel(r: PodRecord): string {
  return r.pod ?? `${r.containerId.slice(0, 12)}/${r.ifname}`;
}

function rows(flows: FlowEntry[], owners: ReadonlyMap<bigint, string>): FlowRow[] {
  return flows.map((f) => ({
    table: f.table,
    tableName: TABLE_NAMES.get(f.table),
    priority: f.priority,
    cookie: cookieText(f.cookie),
    pod: isPodCookie(f.cookie),
    owner: owners.get(f.cookie) ?? (f.cookie === PIPELINE_COOKIE ? 'pipeline' : cookieText(f.cookie)),
    match: f.match.join(','),
    actions: f.actions,
    packets: f.packets,
    bytes: f.bytes,
  }));
}

/**
 * The bridge's flows (all, or one cookie's) over the native OpenFlow client, as ovs-ofctl's parsed
 * dump would give them. Equivalent to: `ovs-ofctl dump-flows BRIDGE [cookie=C/-1]`.
 */
async function withFlowTable<T>(target: SwitchTarget, fn: (table: FlowTable) => Promise<T>): Promise<T> {
  const table = new FlowTable(defaultOpenflowTarget(target.ovsdb, target.bridge));
  try {
    await table.waitUp(5000);
    return await fn(table);
  } finally {
    await table.close();
  }
}

async function dump(table: FlowTable, cookie?: bigint) {
  return (await table.dump(cookie)).map(toFlowEntry);
}

/** Every flow on the bridge. */
export async function bridgeFlows(target: SwitchTarget): Promise<FlowRow[]> {
  const pods = await podPorts(target);
  const owners = new Map(pods.map((p) => [p.cookie, `pod ${podLabel(p.record)}`]));
  return rows(await withFlowTable(target, (t) => dump(t)), owners);
}

/** The flows of each pod port matching `query` (NAMESPACE/NAME or a container ID); none: empty. */
export async function podFlows(target: SwitchTarget, query: string): Promise<PodFlows[]> {
  const pods = await podPorts(target);
  const owners = new Map(pods.map((p) => [p.cookie, `pod ${podLabel(p.record)}`]));
  const matching = pods.filter((x) => podMatches(x.record, query));
  if (matching.length === 0) return [];
  return withFlowTable(target, async (table) => {
    const out: PodFlows[] = [];
    for (const p of matching) {
      const [stats] = p.ofport !== undefined && p.ofport > 0 ? await table.portStats(p.ofport) : [];
      out.push({
        port: p.port,
        ofport: p.ofport,
        record: p.record,
        cookie: cookieText(p.cookie),
        flows: rows(await dump(table, p.cookie), owners),
        counters: stats && counters(stats),
      });
    }
    return out;
  });
}

function counters(s: PortStats): PortCounters {
  const n = (v: bigint) => Number(v);
  return {
    rx: { packets: n(s.rxPackets), bytes: n(s.rxBytes), dropped: n(s.rxDropped), errors: n(s.rxErrors) },
    tx: { packets: n(s.txPackets), bytes: n(s.txBytes), dropped: n(s.txDropped), errors: n(s.txErrors) },
  };
}
