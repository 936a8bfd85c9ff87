/** The CLI commands that ask the running agent: status, pods, ipam, gc. */
import type { IpamRow, PodRow } from '../agent/ops/control-methods.js';
import type { CliArgs } from './args.js';
import { callAgent, resolveControlSocket } from './control-client.js';
import { age, table } from './table.js';

export interface Command {
  summary: string;
  help: string;
  run(args: CliArgs, out: (s: string) => void): Promise<number>;
  /**
   * The exit status when the command fails; default 1. A command whose status 1 means a finding (the
   * ARP audit's violations) fails with another, so a script can tell a finding from a failure.
   */
  errorStatus?: number;
}

const COMMON = `options:
  --config FILE   the agent's configuration (finds its control socket); default /etc/podwire/agent.yaml
  --socket PATH   the control socket itself
  --json          machine-readable output
  --help          this text
`;

function mib(bytes: number): string {
  return (bytes / 1048576).toFixed(1);
}

/** The agent's `LeaseState` (cluster-node.ts), one line. */
function leaseLine(l: { state: string; reason?: string; since?: string }): string {
  if (l.state === 'not-held') return `NOT HELD since ${age(l.since ?? '')}: ${l.reason}`;
  if (l.state === 'remembered')
    return `remembered (node-lease.json), not yet confirmed by the store, since ${age(l.since ?? '')}`;
  if (l.state === 'confirmed') return 'remembered, confirmed by the store';
  return 'settled at start (leased from the store, or configured)';
}

function ask(method: string, render: (result: unknown) => string): Command['run'] {
  return async (args, out) => {
    const result = await callAgent(resolveControlSocket(args), method);
    out(args.json ? `${JSON.stringify(result, null, 2)}\n` : render(result));
    return 0;
  };
}

export const COMMANDS: Record<string, Command> = {
  status: {
    summary: 'the agent, its datapath, pods and descriptors',
    help: `usage: podwire status [options]\n\nShows the running agent: pod CIDRs, datapath and its readiness, pods, requests in flight.\n\n${COMMON}`,
    run: ask('status', (r) => {
      const s = r as {
        pid: number;
        startedAt: string;
        podCIDRs: string[];
        datapath: { kind: string; ready: boolean; reason?: string; podGuards?: string };
        pods: number;
        requestsInFlight: number;
        announcementFrames: number;
        openDescriptors: number;
        memory?: { rss: number; heapUsed: number; external: number };
        egress?: { masquerade: boolean; keep?: string[]; repairs?: number };
        unreadableClaims?: Array<{ range: string; ip: string; file: string; reason: string }>;
        cluster?: {
          node: { name: string; underlayIP: string };
          store: string;
          health: { ok: boolean; error?: string; since: string };
          registered: boolean;
          lease?: { state: string; reason?: string; since?: string };
          mode: string;
          overlay: { peers: string[]; skipped: Array<{ name: string; reason: string }> };
          refused?: Array<{ name: string; reason: string }>;
        };
      };
      const dp = s.datapath.ready ? 'ready' : `NOT READY: ${s.datapath.reason}`;
      const c = s.cluster;
      const cluster = c
        ? [
            `node:         ${c.node.name} (underlay ${c.node.underlayIP})${c.registered ? '' : ', NOT REGISTERED yet'}`,
            `store:        ${c.store}: ${c.health.ok ? 'healthy' : `UNREACHABLE (${c.health.error})`} since ${age(c.health.since)}`,
            ...(c.lease ? [`lease:        ${leaseLine(c.lease)}`] : []),
            `traffic:      ${c.mode}`,
            `peers:        ${c.overlay.peers.length === 0 ? '(none)' : c.overlay.peers.join(', ')}`,
            ...c.overlay.skipped.map((k) => `  skipped:    ${k.name}: ${k.reason}`),
            ...(c.refused ?? []).map((k) => `  refused:    ${k.name}: ${k.reason}`),
          ]
        : [];
      return [
        `agent:        pid ${s.pid}, up ${age(s.startedAt)}`,
        `pod CIDRs:    ${s.podCIDRs.join(', ')}`,
        `datapath:     ${s.datapath.kind} (${dp})`,
        `pod guards:   ${s.datapath.podGuards === 'off' ? 'OFF (podGuards: off)' : 'on'}`,
        `pods:         ${s.pods}`,
        `in flight:    ${s.requestsInFlight}`,
        `announced:    ${s.announcementFrames} frames`,
        `descriptors:  ${s.openDescriptors}`,
        ...(s.unreadableClaims ?? []).map(
          (c) => `UNREADABLE:   ${c.ip} in ${c.range} (${c.reason}), taken, owner unknown: ${c.file}`,
        ),
        ...(s.egress
          ? [
              `egress:       ${s.egress.masquerade ? `masquerade, except to ${(s.egress.keep ?? []).join(', ')}${s.egress.repairs ? ` (table reinstated ${s.egress.repairs} time(s))` : ''}` : 'no masquerade'}`,
            ]
          : []),
        ...(s.memory
          ? [
              `memory:       rss ${mib(s.memory.rss)} MiB, heap used ${mib(s.memory.heapUsed)} MiB, outside the heap ${mib(s.memory.external)} MiB`,
            ]
          : []),
        ...cluster,
        '',
      ].join('\n');
    }),
  },
  pods: {
    summary: 'a table of the pods on this node',
    help: `usage: podwire pods [options]\n\nOne row per attachment: pod, container ID (in full: \`podwire flows --pod\` takes it as printed),\ninterface, CNI network ('-': recorded before podwire kept it), addresses, MAC, the host end of the\npod's veth (HOST VETH, name#ifindex; not a Kubernetes hostPort), age.\n\n${COMMON}`,
    run: ask('pods', (r) =>
      table(
        ['POD', 'CONTAINER', 'IFACE', 'NETWORK', 'ADDRESSES', 'MAC', 'HOST VETH', 'AGE'],
        (r as PodRow[]).map((p) => [
          p.pod ?? '-',
          p.containerId,
          p.ifname,
          p.network ?? '-',
          p.addresses.join(','),
          p.mac,
          p.hostIfindex === undefined ? `${p.hostVeth} (MISSING)` : `${p.hostVeth}#${p.hostIfindex}`,
          age(p.createdAt),
        ]),
      ),
    ),
  },
  ipam: {
    summary: 'address usage per pod CIDR',
    help: `usage: podwire ipam [options]\n\nAddresses in use per range (network, gateway and broadcast are not counted), and below the table\nevery claim the store cannot read (a torn or foreign file): its address stays taken and no reconcile\nor GC releases it; once no pod uses that address, remove the file named and run \`podwire gc\`.\nWith --json, \`size\` and \`used\` are decimal strings: an IPv6 range's size is past what a JSON\nnumber holds exactly.\n\n${COMMON}`,
    run: ask('ipam', (r) => {
      const rows = r as IpamRow[];
      const unreadable = rows.flatMap((u) =>
        (u.unreadable ?? []).map(
          (c) => `UNREADABLE ${c.ip} in ${u.range}: ${c.reason}; taken, owner unknown; file ${c.file}\n`,
        ),
      );
      return (
        table(
          ['RANGE', 'USED', 'SIZE', 'USE', 'UNREADABLE'],
          rows.map((u) => [
            u.range,
            u.used,
            u.size,
            `${((100 * Number(u.used)) / Number(u.size)).toFixed(1)}%`,
            String((u.unreadable ?? []).length),
          ]),
        ) + unreadable.join('')
      );
    }),
  },
  gc: {
    summary: 'release addresses and host veths that no pod uses any more',
    help: `usage: podwire gc [options]\n\nRuns the agent's reconcile now: addresses whose host veth is gone are released, podwire host veths\nwithout an address are removed.\n\n${COMMON}`,
    run: ask('gc', (r) => {
      const g = r as { kept: number; released: unknown[]; vethsRemoved: string[] };
      return `kept ${g.kept}, released ${g.released.length} attachment(s), removed ${g.vethsRemoved.length} host veth(s)\n`;
    }),
  },
};
