/**
 * `node dist/bench/cluster-scale.js [OPTIONS]` (root): a large cluster as one node sees it (issue 17).
 * One real agent (etcd store, VXLAN, Linux bridge) in a node namespace; N simulated peer records are
 * written into its etcd in transactions of 100, as N agents registering would (no agents run for the
 * peers), then deleted the same way. Measured per N, for the current peer programming and, side by
 * side in the same run, the previous one (the agent started with PODWIRE_BENCH_LEGACY_PEERS=1):
 *
 * - time from the first write until the node's kernel holds a route (proto 250) and an FDB entry for
 *   every peer, and from the first delete until none is left;
 * - the agent's RSS once all peers are programmed (and its peak while they were), and the CPU it
 *   used (all threads) from the first write (delete) until done;
 * - current implementation only: the agent restarted with every peer in the store, the time until it
 *   has listed and converged them, and its RSS then (what a list of N records costs, decision 23);
 * - CNI ADD latency on the node, one ADD (then its DEL) at a time through the relay: idle before the
 *   join, and while the peers join (and leave).
 *
 *   --peers 100,1000,5000     counts for the current programming
 *   --legacy-peers 100,1000   counts for the previous one (empty: skip it)
 *   --control-peers 5000      counts for the control: the same writes under a prefix the agent does
 *                             not watch ("programmed" = written), i.e. what the writes alone cost ADD
 *   --timeout-s 60            give up waiting for one phase after this long (reported as not done)
 *   --json FILE               also write the results as JSON
 *   --svg FILE                also draw programming time against N, both implementations
 *   --from-json FILE          run nothing: the table (and --svg) from an earlier run's --json
 *   --etcd-on-disk            etcd's data directory in TMPDIR (default: /dev/shm, see runOne)
 *
 * Every namespace, process and directory is removed at the end, on failure and on SIGINT/SIGTERM.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { EtcdServer } from '../bed/etcd.js';
import { run } from '../bed/exec.js';
import { AGENT_NODE_FLAGS, TestNode } from '../bed/node.js';
import { Underlay } from '../bed/underlay.js';
import { EtcdGateway } from '../src/cluster/etcd-gateway.js';
import { EtcdKeys, EtcdKv, type TxnOp } from '../src/cluster/etcd-kv.js';
import { VXLAN_DEVICE, vtepMacFor } from '../src/datapath/overlay/vxlan-overlay.js';
import { percentile } from './stats.js';

const PREFIX = '/podwire';
const TXN_SIZE = 100;
const POLL_MS = 100;
const IDLE_ADDS = 30;
const POD_NAMESPACES = 20;

/** `control`: the same writes under a prefix the agent does not watch (what the join costs the node without programming). */
type Mode = 'current' | 'legacy' | 'control';

interface PhaseResult {
  /** Seconds until done, or undefined when not done within the timeout. */
  seconds: number | undefined;
  /** Routes and FDB entries seen last (when not done). */
  routes: number;
  fdb: number;
  /** ADD latencies (ms) of the ADDs started during the phase. */
  adds: number[];
  /** CPU seconds the agent used (all its threads, user + system) from the first write until done. */
  cpuS?: number;
}

interface RunResult {
  mode: Mode;
  peers: number;
  program: PhaseResult;
  remove: PhaseResult;
  idleAdds: number[];
  rssMiB: number;
  peakRssMiB: number;
  /** The agent restarted with every peer in the store (current implementation only). */
  restart?: RestartResult;
}

interface RestartResult {
  /** From the restart until the agent logged its converge of all peers. */
  seconds: number | undefined;
  /** RSS once converged, and the peak from start until then (sampled every 20 ms). */
  rssMiB: number;
  peakRssMiB: number;
}

function peerRecord(i: number): { name: string; value: string } {
  const name = `peer-${String(i).padStart(5, '0')}`;
  const record = {
    name,
    underlayIP: `172.31.${i >> 8}.${i & 255}`,
    podCIDRs: [`10.${1 + (i >> 8)}.${i & 255}.0/24`],
    vtepMac: vtepMacFor(name),
  };
  return { name, value: JSON.stringify(record) };
}

/** CPU seconds the process has used so far, all threads, user + system (/proc/PID/stat). */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command (which may hold spaces) in parentheses; utime and stime are 14 and 15.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100; // USER_HZ
}

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

/** Routes with proto 250 and FDB entries with a remote on the VXLAN device, in the node namespace. */
async function kernelCounts(ns: string): Promise<{ routes: number; fdb: number }> {
  const [r, f] = await Promise.all([
    run('ip', ['-n', ns, 'route', 'show', 'proto', '250']),
    run('ip', ['netns', 'exec', ns, 'bridge', 'fdb', 'show', 'dev', VXLAN_DEVICE]),
  ]);
  const lines = (s: string, must?: string) =>
    s.split('\n').filter((l) => l.trim() !== '' && (must === undefined || l.includes(must))).length;
  return { routes: lines(r.stdout), fdb: lines(f.stdout, ' dst ') };
}

/** ADD then DEL, one at a time, until `stop` says so; returns the ADD latencies (ms). */
async function addLoop(node: TestNode, pods: string[], stop: () => boolean, tag: string): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; !stop(); i++) {
    const netns = pods[i % pods.length] as string;
    const containerId = `${tag}-${i}`;
    const t0 = performance.now();
    const add = await node.cni({ command: 'ADD', containerId, netns });
    const ms = performance.now() - t0;
    if (add.code !== 0) {
      // The agent was killed at the end of a phase that did not finish: the ADD can only fail.
      if (stop()) break;
      // Reported, not fatal: the figures say how many ADDs there were.
      process.stderr.write(
        `cluster-scale: ${tag}: ADD ${containerId} failed: ${add.stdout.trim()} ${add.stderr.trim()}\n`,
      );
      await node.cni({ command: 'DEL', containerId, netns });
      continue;
    }
    out.push(ms);
    const del = await node.cni({ command: 'DEL', containerId, netns });
    if (del.code !== 0 && !stop())
      process.stderr.write(`cluster-scale: ${tag}: DEL ${containerId} failed: ${del.stdout.trim()}\n`);
  }
  return out;
}

async function writeAll(kv: EtcdKv, keys: EtcdKeys, n: number, del: boolean): Promise<void> {
  for (let start = 0; start < n; start += TXN_SIZE) {
    const ops: TxnOp[] = [];
    for (let i = start; i < Math.min(n, start + TXN_SIZE); i++) {
      const p = peerRecord(i);
      ops.push(del ? { delete: keys.node(p.name) } : { put: keys.node(p.name), value: p.value });
    }
    await kv.txn({ compare: [], success: ops });
  }
}

async function phase(
  o: { node: TestNode; pods: string[]; ns: string; timeoutMs: number; tag: string; pid: number },
  write: () => Promise<void>,
  done: (c: { routes: number; fdb: number }, written: boolean) => boolean,
  onPoll: () => void,
): Promise<PhaseResult> {
  let finished = false;
  const cpu0 = cpuSeconds(o.pid);
  const t0 = performance.now();
  const adds = addLoop(o.node, o.pods, () => finished, o.tag);
  // Never an unhandled rejection (it would end the process before the cleanup): a failed ADD loop
  // fails the phase when it is awaited below.
  adds.catch(() => undefined);
  let written = false;
  const writing = write().then(() => {
    written = true;
  });
  writing.catch(() => undefined);
  let last = { routes: 0, fdb: 0 };
  let seconds: number | undefined;
  let cpuS: number | undefined;
  try {
    for (;;) {
      last = await kernelCounts(o.ns);
      onPoll();
      if (done(last, written)) {
        seconds = (performance.now() - t0) / 1000;
        cpuS = cpuSeconds(o.pid) - cpu0;
        break;
      }
      if (performance.now() - t0 > o.timeoutMs) break;
      await sleep(POLL_MS);
    }
  } finally {
    finished = true;
    await writing;
  }
  if (seconds === undefined) {
    // Not done in time: an ADD may be stuck behind the agent's backlog for minutes. What finished
    // counts; the run ends here (the agent is killed, the later phase is not measured).
    const settled = await Promise.race([adds, sleep(2000).then(() => undefined)]);
    return { seconds, ...last, adds: settled ?? [] };
  }
  return { seconds, ...last, adds: await adds, ...(cpuS === undefined ? {} : { cpuS }) };
}

/** Stops the agent, starts it again and waits until it has converged to all `peers` from its list. */
async function restartPhase(node: TestNode, peers: number, timeoutMs: number): Promise<RestartResult> {
  await node.stopAgent('SIGTERM');
  const from = node.logs.length;
  const t0 = performance.now();
  await node.startAgent();
  const pid = node.agentPid;
  let peak = rssMiB(pid);
  const converged = (): boolean => {
    for (let i = node.logs.indexOf('"peers converged"', from); i >= 0; ) {
      const line = node.logs.slice(node.logs.lastIndexOf('\n', i) + 1, node.logs.indexOf('\n', i));
      if ((JSON.parse(line) as { peers?: number }).peers === peers) return true;
      i = node.logs.indexOf('"peers converged"', i + 1);
    }
    return false;
  };
  let seconds: number | undefined;
  while (performance.now() - t0 < timeoutMs) {
    peak = Math.max(peak, rssMiB(pid));
    if (converged()) {
      seconds = (performance.now() - t0) / 1000;
      break;
    }
    await sleep(20);
  }
  return { seconds, rssMiB: rssMiB(pid), peakRssMiB: peak };
}

async function runOne(
  mode: Mode,
  peers: number,
  timeoutMs: number,
  etcdOnTmpfs: boolean,
): Promise<RunResult> {
  const underlay = new Underlay();
  let etcd: EtcdServer | undefined;
  let node: TestNode | undefined;
  let gateway: EtcdGateway | undefined;
  const cleanup = async () => {
    gateway?.destroy();
    // A graceful stop first when profiling (the profile is written then); else SIGKILL (cleanup), as
    // an agent whose event loop is blocked (the previous implementation at 5000 peers) ignores SIGTERM.
    if (process.env.CLUSTER_SCALE_AGENT_FLAGS && node?.agent && node.agent.exitCode === null)
      await node.stopAgent('SIGTERM').catch(() => undefined);
    await node?.cleanup();
    await etcd?.cleanup();
    await underlay.cleanup();
  };
  const onSignal = () => {
    void cleanup().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    await underlay.setup();
    // etcd's data on tmpfs: in a cluster etcd runs elsewhere, so its fsyncs (one per transaction of
    // the join) must not queue the node's own IPAM fsyncs on this machine's one disk.
    const tmp = process.env.TMPDIR;
    if (etcdOnTmpfs) process.env.TMPDIR = '/dev/shm';
    try {
      etcd = await EtcdServer.start({ netns: underlay.ns, host: underlay.hostIp });
    } finally {
      if (tmp === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = tmp;
    }
    const member = await underlay.addNode('n0');
    const extraFlags = (process.env.CLUSTER_SCALE_AGENT_FLAGS ?? '').split(' ').filter((f) => f !== '');
    node = new TestNode({
      nodeNs: member.ns,
      nodeFlags: [...AGENT_NODE_FLAGS, ...extraFlags],
      config: {
        podCIDRs: null,
        cluster: {
          store: 'etcd',
          endpoints: [etcd.endpoint],
          prefix: PREFIX,
          requestTimeoutMs: 8000,
          // The bench's etcd speaks plain http inside its own underlay namespace.
          ...(etcd.endpoint.startsWith('http://') ? { insecure: true } : {}),
        },
        nodeName: 'node-0',
        uplink: member.uplink,
        trafficMode: 'encap',
        clusterCIDRs: ['10.0.0.0/8'],
        nodeCIDRMaskSize: { ipv4: 24 },
      },
    });
    if (mode === 'legacy') process.env.PODWIRE_BENCH_LEGACY_PEERS = '1';
    try {
      await node.setup();
    } finally {
      delete process.env.PODWIRE_BENCH_LEGACY_PEERS;
    }
    const pid = node.agentPid;
    const pods: string[] = [];
    for (let i = 0; i < POD_NAMESPACES; i++) pods.push(await node.addPod(`p${i}`));
    gateway = new EtcdGateway({
      endpoints: [etcd.endpoint],
      requestTimeoutMs: 30_000,
      connect: etcd.connect,
    });
    const kv = new EtcdKv(gateway);
    const keys = new EtcdKeys(mode === 'control' ? `${PREFIX}-control` : PREFIX);
    // Warm-up and the idle figure: no peers, nothing being programmed.
    let n = 0;
    await addLoop(node, pods, () => n++ >= 5, 'warm');
    n = 0;
    const idleAdds = await addLoop(node, pods, () => n++ >= IDLE_ADDS, 'idle');
    let peak = 0;
    const o = { node, pods, ns: member.ns, timeoutMs, pid };
    const sample = () => {
      peak = Math.max(peak, rssMiB(node?.agentPid ?? pid));
    };
    const program = await phase(
      { ...o, tag: 'join' },
      () => writeAll(kv, keys, peers, false),
      (c, written) => (mode === 'control' ? written : c.routes >= peers && c.fdb >= peers),
      sample,
    );
    const rss = rssMiB(pid);
    if (program.seconds === undefined) {
      const none: PhaseResult = { seconds: undefined, routes: -1, fdb: -1, adds: [] };
      return { mode, peers, program, remove: none, idleAdds, rssMiB: rss, peakRssMiB: peak };
    }
    // A restart with every peer in the store: the agent lists them all, then converges (the kernel
    // already holds their entries, so it sends nothing); what that list costs in memory.
    const restart = mode === 'current' ? await restartPhase(node, peers, timeoutMs) : undefined;
    const remove = await phase(
      { ...o, ...(restart ? { pid: node.agentPid } : {}), tag: 'leave' },
      () => writeAll(kv, keys, peers, true),
      (c, written) => (mode === 'control' ? written : c.routes === 0 && c.fdb === 0),
      sample,
    );
    const logFile = process.env.CLUSTER_SCALE_AGENT_LOG;
    if (logFile) writeFileSync(`${logFile}.${mode}.${peers}`, node.logs);
    return {
      mode,
      peers,
      program,
      remove,
      idleAdds,
      rssMiB: rss,
      peakRssMiB: peak,
      ...(restart ? { restart } : {}),
    };
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await cleanup();
  }
}

function p50(xs: readonly number[]): number {
  return xs.length === 0
    ? Number.NaN
    : percentile(
        [...xs].sort((a, b) => a - b),
        0.5,
      );
}

function fmtS(p: PhaseResult, peers: number): string {
  if (p.routes < 0) return 'not measured';
  return p.seconds === undefined
    ? `not done (${p.routes}/${peers} routes, ${p.fdb}/${peers} FDB)`
    : `${p.seconds.toFixed(2)} s`;
}

function table(results: readonly RunResult[]): string {
  const rows = [
    '| implementation | peers | programmed | removed | agent CPU s join / leave | agent RSS MiB (peak) | restart: converged, RSS MiB (peak) | ADD p50 idle ms | ADD p50 / max during join ms (n) | join p50 / idle p50 | ADD p50 / max during leave ms (n) |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  const max = (xs: readonly number[]) => (xs.length === 0 ? Number.NaN : Math.max(...xs));
  // Runs recorded before the CPU column have none.
  const cpu = (p: PhaseResult) => (p.cpuS === undefined ? '—' : p.cpuS.toFixed(2));
  const restart = (x: RestartResult | undefined) =>
    x === undefined
      ? '—'
      : `${x.seconds === undefined ? 'not done' : `${x.seconds.toFixed(2)} s`}, ${x.rssMiB.toFixed(0)} (${x.peakRssMiB.toFixed(0)})`;
  for (const r of results) {
    const idle = p50(r.idleAdds);
    const join = p50(r.program.adds);
    const j = r.program.adds;
    const l = r.remove.adds;
    rows.push(
      `| ${r.mode} | ${r.peers} | ${fmtS(r.program, r.peers)} | ${fmtS(r.remove, r.peers)} | ${cpu(r.program)} / ${cpu(r.remove)} | ${r.rssMiB.toFixed(0)} (${r.peakRssMiB.toFixed(0)}) | ${restart(r.restart)} | ${idle.toFixed(1)} | ${join.toFixed(1)} / ${max(j).toFixed(0)} (${j.length}) | ${(join / idle).toFixed(2)} | ${p50(l).toFixed(1)} / ${max(l).toFixed(0)} (${l.length}) |`,
    );
  }
  return rows.join('\n');
}

/** Programming time against N, both implementations, log-log, as a small SVG. */
function svg(results: readonly RunResult[]): string {
  const W = 520;
  const H = 320;
  const M = 50;
  const pts = results.filter((r) => r.program.seconds !== undefined);
  const xs = pts.map((r) => Math.log10(r.peers));
  const ys = pts.map((r) => Math.log10(r.program.seconds as number));
  const [x0, x1] = [Math.min(...xs, 2), Math.max(...xs, 3.7)];
  const [y0, y1] = [Math.min(...ys, -1), Math.max(...ys, 1.5)];
  const px = (x: number) => M + ((x - x0) / (x1 - x0)) * (W - 2 * M);
  const py = (y: number) => H - M - ((y - y0) / (y1 - y0)) * (H - 2 * M);
  const colors: Record<Mode, string> = { current: '#1f77b4', legacy: '#d62728', control: '#7f7f7f' };
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
    '<title>podwire: time to program all peers against their number, current and previous peer programming</title>',
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<line x1="${M}" y1="${H - M}" x2="${W - M}" y2="${H - M}" stroke="black"/>`,
    `<line x1="${M}" y1="${M}" x2="${M}" y2="${H - M}" stroke="black"/>`,
    `<text x="${W / 2}" y="${H - 12}" text-anchor="middle">peers (log)</text>`,
    `<text x="14" y="${H / 2}" transform="rotate(-90 14 ${H / 2})" text-anchor="middle">time to program all peers, s (log)</text>`,
  ];
  for (const n of [100, 1000, 5000])
    parts.push(`<text x="${px(Math.log10(n))}" y="${H - M + 16}" text-anchor="middle">${n}</text>`);
  for (const s of [0.1, 1, 10, 30])
    if (Math.log10(s) >= y0 && Math.log10(s) <= y1)
      parts.push(`<text x="${M - 6}" y="${py(Math.log10(s)) + 4}" text-anchor="end">${s}</text>`);
  for (const [i, mode] of (['current', 'legacy'] as Mode[]).entries()) {
    const mine = pts.filter((r) => r.mode === mode).sort((a, b) => a.peers - b.peers);
    const line = mine
      .map((r) => `${px(Math.log10(r.peers))},${py(Math.log10(r.program.seconds as number))}`)
      .join(' ');
    parts.push(`<polyline points="${line}" fill="none" stroke="${colors[mode]}" stroke-width="2"/>`);
    for (const r of mine)
      parts.push(
        `<circle cx="${px(Math.log10(r.peers))}" cy="${py(Math.log10(r.program.seconds as number))}" r="3" fill="${colors[mode]}"/>`,
      );
    parts.push(
      `<text x="${M + 10}" y="${M + 14 + 16 * i}" fill="${colors[mode]}">${mode === 'current' ? 'delta + batches (issue 17)' : 'previous: full converge per change'}</text>`,
    );
  }
  const unfinished = results.filter((r) => r.program.seconds === undefined);
  for (const [i, r] of unfinished.entries())
    parts.push(
      `<text x="${W - M}" y="${M + 14 + 16 * i}" text-anchor="end" fill="${colors[r.mode]}">${r.mode === 'legacy' ? 'previous' : r.mode}, ${r.peers} peers: not done after the timeout</text>`,
    );
  parts.push('</svg>');
  return parts.join('\n');
}

function counts(text: string | undefined, fallback: number[]): number[] {
  if (text === undefined) return fallback;
  return text
    .split(',')
    .filter((s) => s !== '')
    .map((s) => {
      const v = Number(s);
      if (!Number.isInteger(v) || v <= 0 || v > 60_000) throw new Error(`bad count ${s}`);
      return v;
    });
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const opt = (name: string): string | undefined => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const current = counts(opt('--peers'), [100, 1000, 5000]);
  const legacy = counts(opt('--legacy-peers'), [100, 1000]);
  const control = counts(opt('--control-peers'), [5000]);
  const timeoutMs = Number(opt('--timeout-s') ?? 60) * 1000;
  const results: RunResult[] = [];
  const from = opt('--from-json');
  if (from) results.push(...(JSON.parse(readFileSync(from, 'utf8')) as RunResult[]));
  const plan: Array<[Mode, number]> = [
    ...current.map((n): [Mode, number] => ['current', n]),
    ...legacy.map((n): [Mode, number] => ['legacy', n]),
    ...control.map((n): [Mode, number] => ['control', n]),
  ];
  for (const [mode, n] of from ? [] : plan) {
    process.stderr.write(`cluster-scale: ${mode}, ${n} peers\n`);
    const r = await runOne(mode, n, timeoutMs, !argv.includes('--etcd-on-disk'));
    results.push(r);
    process.stderr.write(`${table([r]).split('\n')[2]}\n`);
  }
  const byN = (mode: Mode, n: number) => results.find((r) => r.mode === mode && r.peers === n);
  const c1 = byN('current', 1000)?.program.seconds;
  const c5 = byN('current', 5000)?.program.seconds;
  process.stdout.write(`${table(results)}\n`);
  if (c1 !== undefined && c5 !== undefined)
    process.stdout.write(`\ncurrent, programming 5000 / 1000: ${(c5 / c1).toFixed(2)}\n`);
  const json = opt('--json');
  if (json) writeFileSync(json, `${JSON.stringify(results, null, 2)}\n`);
  const svgPath = opt('--svg');
  if (svgPath) writeFileSync(svgPath, `${svg(results)}\n`);
}

main().catch((err) => {
  process.stderr.write(`cluster-scale: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
