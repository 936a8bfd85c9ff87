/**
 * `podwire policy [--pod NAMESPACE/NAME]`: the NetworkPolicy this node enforces, per local pod and
 * direction: the policies that isolate it, each rule's allowed peers and ports with the packets and
 * bytes the datapath counted for it, and what the isolation dropped. Asks the agent (control socket),
 * which reads the counters from the datapath.
 */
import type { CompiledRule, DirectionPolicy, PodPolicy, PortRange } from '../policy/model.js';
import type { CliArgs } from './args.js';
import type { Command } from './commands.js';
import { callAgent, resolveControlSocket } from './control-client.js';

interface Counter {
  rule: string;
  pod: string;
  packets: string;
  bytes: string;
}

export interface PolicyReport {
  enabled: boolean;
  /** Why not, when not enabled. */
  reason?: string;
  mode?: 'live' | 'snapshot' | 'unknown';
  lastError?: string;
  refused?: string[];
  pods?: PodPolicy[];
  counters?: Counter[];
}

function ports(p: 'any' | PortRange[]): string {
  if (p === 'any') return 'any port';
  return p.map((r) => `${r.protocol} ${r.first === r.last ? r.first : `${r.first}-${r.last}`}`).join(', ');
}

function counted(c: Counter | undefined): string {
  return c ? `${c.packets} pkts ${c.bytes} bytes` : '- pkts';
}

function direction(
  name: string,
  pod: string,
  d: DirectionPolicy | null,
  counters: Map<string, Counter>,
): string[] {
  if (d === null) return [`  ${name}: not isolated (everything passes)`];
  const lines = [`  ${name}: isolated by ${d.policies.join(', ')}`];
  if (d.rules.length === 0) lines.push('    no rule allows anything');
  for (const r of d.rules as CompiledRule[]) {
    lines.push(`    ${r.id}  ${counted(counters.get(`${pod}\u0000${r.id}`))}`);
    for (const e of r.entries)
      lines.push(
        `      from/to ${e.peers === 'any' ? 'any address' : e.peers.join(', ')}  ${ports(e.ports)}`,
      );
  }
  lines.push(`    denied  ${counted(counters.get(`${pod}\u0000${pod}/${name}/deny`))}`);
  return lines;
}

export function renderPolicy(r: PolicyReport, only: string | undefined): string {
  if (!r.enabled) return `NetworkPolicy: not enforced on this node (${r.reason ?? 'unknown'})\n`;
  const mode =
    r.mode === 'live'
      ? 'from the API server'
      : r.mode === 'snapshot'
        ? 'from the snapshot of the last known state (not listed yet)'
        : 'nothing listed yet: every pod isolated';
  const lines = [
    `NetworkPolicy: in force ${mode}${r.lastError ? `; the last apply FAILED: ${r.lastError}` : ''}`,
  ];
  for (const p of r.refused ?? [])
    lines.push(`refused by the decoder, in force as deny-all for its namespace: ${p}`);
  const counters = new Map((r.counters ?? []).map((c) => [`${c.pod}\u0000${c.rule}`, c]));
  const pods = (r.pods ?? []).filter((p) => only === undefined || `${p.namespace}/${p.name}` === only);
  for (const p of pods) {
    const key = `${p.namespace}/${p.name}`;
    lines.push('', `${key}  ${p.ips.join(', ')}`);
    lines.push(
      ...direction('ingress', key, p.ingress, counters),
      ...direction('egress', key, p.egress, counters),
    );
  }
  if (only !== undefined && pods.length === 0) lines.push('', `${only}: no pod of that name on this node`);
  return `${lines.join('\n')}\n`;
}

async function runPolicy(args: CliArgs, out: (s: string) => void): Promise<number> {
  const only = args.values.get('--pod');
  if (only !== undefined && !/^[^/]+\/[^/]+$/.test(only))
    throw new Error(`--pod ${only}: give the pod as NAMESPACE/NAME`);
  const r = (await callAgent(resolveControlSocket(args), 'policy')) as PolicyReport;
  if (args.json) {
    const pods = (r.pods ?? []).filter((p) => only === undefined || `${p.namespace}/${p.name}` === only);
    out(`${JSON.stringify({ ...r, pods }, null, 2)}\n`);
  } else out(renderPolicy(r, only));
  return only !== undefined && !(r.pods ?? []).some((p) => `${p.namespace}/${p.name}` === only) ? 1 : 0;
}

export const policyCommand: Command = {
  summary: 'the NetworkPolicy this node enforces, per pod and direction, with counters',
  help: `usage: podwire policy [--pod NAMESPACE/NAME] [options]

For each pod on this node (or the one named): per direction, the NetworkPolicies that isolate it
(or "not isolated"), each rule that allows traffic (NAMESPACE/POLICY/DIRECTION/INDEX) with the peers
and ports it allows and the packets and bytes the datapath counted for it, and what the isolation
dropped ("denied"). On OVS a rule counts the connections it let open (their first packets); on the
Linux bridge every packet of the new connections it judged. Only with cluster.store: kubernetes.
Exit status 1 when --pod names no pod of this node.

options:
  --pod NS/NAME   one pod
  --config FILE   the agent's configuration (finds its control socket); default /etc/podwire/agent.yaml
  --socket PATH   the control socket itself
  --json          machine-readable output
  --help          this text
`,
  run: runPolicy,
};
