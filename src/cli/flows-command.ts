/**
 * `podwire flows [--pod ID]`: the OpenFlow pipeline of the OVS datapath, table by table, or the
 * flows of one pod, with their packet counters. Talks to OVS directly (OVSDB for the pod ports,
 * OpenFlow flow stats for the flows), so it works whether or not the agent is running.
 */
import { existsSync } from 'node:fs';
import { type AgentConfig, loadAgentConfig } from '../agent/config.js';
import { InvalidConfigError, UnknownContainerError } from '../base/errors.js';
import { bridgeFlows, type FlowRow, type PortCounters, podFlows } from '../datapath/ovs/flow-report.js';
import type { CliArgs } from './args.js';
import type { Command } from './commands.js';
import { DEFAULT_CONFIG_PATH } from './control-client.js';

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

/** Flows grouped by table, in pipeline order; each line ends with the owner of the flow. */
export function renderFlows(flows: FlowRow[]): string {
  const byTable = new Map<number, FlowRow[]>();
  for (const f of flows) byTable.set(f.table, [...(byTable.get(f.table) ?? []), f]);
  const lines: string[] = [];
  for (const table of [...byTable.keys()].sort((a, b) => a - b)) {
    lines.push(`table ${table} ${byTable.get(table)?.[0]?.tableName ?? ''}`.trimEnd());
    const rows = (byTable.get(table) ?? []).sort((a, b) => b.priority - a.priority);
    for (const f of rows) {
      const match = f.match.length === 0 ? '*' : f.match;
      lines.push(
        `  ${String(f.packets ?? 0).padStart(8)} pkts  priority=${f.priority} ${match} actions=${f.actions}  [${f.owner}]`,
      );
    }
  }
  return `${lines.join('\n')}\n`;
}

async function runFlows(args: CliArgs, out: (s: string) => void): Promise<number> {
  const config = loadOvsConfig(args);
  const query = args.values.get('--pod');
  if (query === undefined) {
    const flows = await bridgeFlows(config);
    out(args.json ? `${JSON.stringify(flowsJson(flows), null, 2)}\n` : renderFlows(flows));
    return 0;
  }
  const matches = await podFlows(config, query);
  if (matches.length === 0) {
    throw new UnknownContainerError(`no pod port on ${config.bridge} for ${query}`);
  }
  for (const p of matches) {
    if (args.json) {
      out(
        `${JSON.stringify({ port: p.port, ofport: p.ofport, ...p.record, counters: p.counters ?? null, flows: flowsJson(p.flows) }, null, 2)}\n`,
      );
      continue;
    }
    const r = p.record;
    out(
      [
        `pod ${r.pod ?? '-'}  container ${r.containerId}  interface ${r.ifname}`,
        `port ${p.port} (ofport ${p.ofport ?? '-'})  mac ${r.mac}  addresses ${r.ips.join(', ')}  cookie ${p.cookie}`,
        renderCounters(p.counters),
        renderFlows(p.flows),
      ].join('\n'),
    );
  }
  return 0;
}

/** The switch's counters of a pod port: what the pod sent (rx) and what reached it (tx). */
export function renderCounters(c: PortCounters | undefined): string {
  if (!c) return 'counters -';
  const side = (x: PortCounters['rx']) =>
    `${x.packets} pkts ${x.bytes} bytes, ${x.dropped} dropped, ${x.errors} errors`;
  return `counters  from the pod: ${side(c.rx)}  to the pod: ${side(c.tx)}`;
}

/** The JSON form: every field of a row but the owner, as before the owner was added. */
function flowsJson(flows: FlowRow[]): object[] {
  return flows.map(({ owner: _owner, ...f }) => f);
}

export const flowsCommand: Command = {
  summary: "the OVS pipeline, or one pod's flows, with packet counters",
  help: `usage: podwire flows [--pod NAMESPACE/NAME | --pod CONTAINERID] [options]

Prints the OpenFlow pipeline of the OVS datapath table by table, each flow with its packet counter
and owner; with --pod, only the flows of that pod. Reads OVSDB and the bridge (OpenFlow) directly, as
named by the agent's configuration. The tables, as the output names them:
  0  CLASSIFIER       sorts by the port a frame came in on and its type; drops what no pod may send
  10 ARP_SPOOF_GUARD  ARP from a pod or the gateway must name its own MAC and IPv4 address
  20 ARP_RESPONDER    answers a pod's ARP for the gateway
  30 ND_GUARD         neighbour solicitations and advertisements must name the pod's own addresses
  40 IP_SPOOF_GUARD   IPv4/IPv6 from a pod must come from its own MAC and address
  45 CT_LOOKUP        looks IP up in conntrack, for the Services' replies (kube-proxy)
  46 GATEWAY_CT       sends replies of connections that came from the gateway back to it
  50 L2_FORWARDING    delivers by destination MAC (the uplink too, in bridging mode)
Every table ends in a priority-0 flow; in a guard table, its counter is what the guard dropped.

options:
  --config FILE   the agent's configuration (bridge, ovsdb); default ${DEFAULT_CONFIG_PATH}
  --pod ID        a pod as NAMESPACE/NAME, or a container ID
  --json          machine-readable output
  --help          this text
`,
  run: runFlows,
};
