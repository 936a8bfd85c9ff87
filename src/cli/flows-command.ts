/**
 * `podwire flows [--pod ID]`: the OpenFlow pipeline of the OVS datapath, table by table, or the
 * flows of one pod, with their packet counters. Talks to OVS directly (OVSDB for the pod ports,
 * `ovs-ofctl dump-flows` for the flows), so it works whether or not the agent is running.
 */
import { existsSync } from 'node:fs';
import { type AgentConfig, loadAgentConfig } from '../agent/config.js';
import { InvalidConfigError, UnknownContainerError } from '../base/errors.js';
import type { FlowEntry } from '../datapath/ovs/flow-text.js';
import { Ofctl } from '../datapath/ovs/ofctl.js';
import { defaultOpenflowTarget } from '../datapath/ovs/ovs-datapath.js';
import { OvsdbClient } from '../datapath/ovs/ovsdb-client.js';
import {
  cookieText,
  isPodCookie,
  PIPELINE_COOKIE,
  podCookie,
  TABLE_NAMES,
} from '../datapath/ovs/pipeline.js';
import { type PodRecord, parsePodExternalIds, podMatches } from '../datapath/ovs/port-record.js';
import { VswitchDb } from '../datapath/ovs/vswitch-db.js';
import type { CliArgs } from './args.js';
import type { Command } from './commands.js';
import { DEFAULT_CONFIG_PATH } from './control-client.js';

interface PodPortInfo {
  port: string;
  ofport: number | undefined;
  record: PodRecord;
  cookie: bigint;
}

function loadOvsConfig(args: CliArgs): AgentConfig {
  const path = args.config ?? (existsSync(DEFAULT_CONFIG_PATH) ? DEFAULT_CONFIG_PATH : undefined);
  if (!path) {
    throw new InvalidConfigError(`no agent config: pass --config FILE (default ${DEFAULT_CONFIG_PATH})`);
  }
  const config = loadAgentConfig(path);
  if (config.datapath !== 'ovs') {
    throw new InvalidConfigError(
      `${path}: datapath is ${config.datapath}; flows exist only with datapath: ovs`,
    );
  }
  return config;
}

/** Every pod port recorded in OVSDB, with the cookie of its flows. */
async function podPorts(config: AgentConfig): Promise<PodPortInfo[]> {
  const client = await OvsdbClient.connect(config.ovsdb);
  try {
    const rows = await new VswitchDb(client, config.bridge).ports();
    const out: PodPortInfo[] = [];
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

/** Flows grouped by table, in pipeline order; each line ends with the owner of the flow. */
export function renderFlows(flows: FlowEntry[], owners: ReadonlyMap<bigint, string>): string {
  const byTable = new Map<number, FlowEntry[]>();
  for (const f of flows) byTable.set(f.table, [...(byTable.get(f.table) ?? []), f]);
  const lines: string[] = [];
  for (const table of [...byTable.keys()].sort((a, b) => a - b)) {
    lines.push(`table ${table} ${TABLE_NAMES.get(table) ?? ''}`.trimEnd());
    const rows = (byTable.get(table) ?? []).sort((a, b) => b.priority - a.priority);
    for (const f of rows) {
      const match = f.match.length === 0 ? '*' : f.match.join(',');
      const owner =
        owners.get(f.cookie) ?? (f.cookie === PIPELINE_COOKIE ? 'pipeline' : cookieText(f.cookie));
      lines.push(
        `  ${String(f.packets ?? 0).padStart(8)} pkts  priority=${f.priority} ${match} actions=${f.actions}  [${owner}]`,
      );
    }
  }
  return `${lines.join('\n')}\n`;
}

async function runFlows(args: CliArgs, out: (s: string) => void): Promise<number> {
  const config = loadOvsConfig(args);
  const ofctl = new Ofctl({ target: defaultOpenflowTarget(config.ovsdb, config.bridge) });
  const pods = await podPorts(config);
  const owners = new Map(pods.map((p) => [p.cookie, `pod ${podLabel(p.record)}`]));
  const query = args.values.get('--pod');
  if (query === undefined) {
    const flows = await ofctl.dumpFlows();
    out(args.json ? `${JSON.stringify(flowsJson(flows), null, 2)}\n` : renderFlows(flows, owners));
    return 0;
  }
  const matches = pods.filter((p) => podMatches(p.record, query));
  if (matches.length === 0) {
    throw new UnknownContainerError(`no pod port on ${config.bridge} for ${query}`);
  }
  for (const p of matches) {
    const flows = await ofctl.dumpFlows(`cookie=${cookieText(p.cookie)}/-1`);
    if (args.json) {
      out(
        `${JSON.stringify({ port: p.port, ofport: p.ofport, ...p.record, flows: flowsJson(flows) }, null, 2)}\n`,
      );
      continue;
    }
    const r = p.record;
    out(
      [
        `pod ${r.pod ?? '-'}  container ${r.containerId}  interface ${r.ifname}`,
        `port ${p.port} (ofport ${p.ofport ?? '-'})  mac ${r.mac}  addresses ${r.ips.join(', ')}  cookie ${cookieText(p.cookie)}`,
        renderFlows(flows, owners),
      ].join('\n'),
    );
  }
  return 0;
}

function flowsJson(flows: FlowEntry[]): object[] {
  return flows.map((f) => ({
    table: f.table,
    tableName: TABLE_NAMES.get(f.table),
    priority: f.priority,
    cookie: cookieText(f.cookie),
    pod: isPodCookie(f.cookie),
    match: f.match.join(','),
    actions: f.actions,
    packets: f.packets,
    bytes: f.bytes,
  }));
}

export const flowsCommand: Command = {
  summary: "the OVS pipeline, or one pod's flows, with packet counters",
  help: `usage: podwire flows [--pod NAMESPACE/NAME | --pod CONTAINERID] [options]

Prints the OpenFlow pipeline of the OVS datapath table by table (classifier, ARP spoof guard, ARP
responder, ND guard, IP spoof guard, L2 forwarding), each flow with its packet counter and owner; with
--pod, only the flows of that pod. Reads OVSDB and the bridge directly (ovs-ofctl), as named by the
agent's configuration.

options:
  --config FILE   the agent's configuration (bridge, ovsdb); default ${DEFAULT_CONFIG_PATH}
  --pod ID        a pod as NAMESPACE/NAME, or a container ID
  --json          machine-readable output
  --help          this text
`,
  run: runFlows,
};
