/**
 * Pod TCP throughput with transmit checksumming on and off in the pods, with and without the checksum
 * hop (src/datapath/checksum-ifb.ts), decision 32: what each costs. Settings: "on" (tx on, no hop: the
 * Linux bridge before decision 32, the reference, insecure), "off" (tx off, no hop: decision 32's first
 * fix), "hop" (tx on through the hop: now), "hop+off" (both). The hop is taken out and put back with
 * `tc` in the node's namespace. Two beds, each made once, with podwire's Linux bridge datapath: two pods on one node, and
 * one pod on each of two nodes over VXLAN (the underlay's veths compute checksums, as NICs do). In
 * each bed the two settings take turns, round by round (the order flips each round), one iperf3 TCP
 * stream of `--seconds` each; the figure is the median per setting and the ratio off/on. The
 * reference ("on") is the Linux bridge as it was before decision 32.
 *
 *   node dist/bench/pod-throughput.js [--seconds 5] [--rounds 3] [--datapath linux-bridge|ovs]
 */
import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';
import { TestCluster } from '../bed/cluster.js';
import { must, run } from '../bed/exec.js';
import { netnsPath } from '../bed/namespaces.js';
import { resultIps, TestNode } from '../bed/node.js';
import { EthtoolSocket } from '../src/kernel/ethtool.js';
import { inNetns, NetnsHandle } from '../src/kernel/netns.js';
import { summarize } from './stats.js';

const { values } = parseArgs({
  options: { seconds: { type: 'string' }, rounds: { type: 'string' }, datapath: { type: 'string' } },
});
const SECONDS = Number(values.seconds ?? 5);
const ROUNDS = Number(values.rounds ?? 3);
const DATAPATH = (values.datapath ?? 'linux-bridge') as 'linux-bridge' | 'ovs';

interface Pair {
  from: string;
  to: string;
  toIp: string;
  /** The pods' host veths, each with its node's namespace. */
  hosts: Array<{ nodeNs: string; veth: string }>;
}

type Setting = 'on' | 'off' | 'hop' | 'hop+off';
const SETTINGS: Setting[] = ['on', 'off', 'hop', 'hop+off'];

/** Equivalent to: `tc qdisc del dev VETH ingress` or the hop's qdisc and filter (checksum-ifb.ts) again. */
async function setHop(pair: Pair, on: boolean): Promise<void> {
  for (const { nodeNs, veth } of pair.hosts) {
    await run('tc', ['-n', nodeNs, 'qdisc', 'del', 'dev', veth, 'ingress']);
    if (!on) continue;
    await must('tc', ['-n', nodeNs, 'qdisc', 'add', 'dev', veth, 'ingress']);
    await must('tc', [
      ...['-n', nodeNs, 'filter', 'add', 'dev', veth, 'ingress', 'protocol', 'all', 'prio', '1', 'u32'],
      ...['match', 'u32', '0', '0', 'action', 'mirred', 'egress', 'redirect', 'dev', 'podwire-csum0'],
    ]);
  }
}

/** Equivalent to: `ip netns exec NS ethtool -K eth0 tx on|off` in both pods. */
function setTx(pair: Pair, on: boolean): void {
  using home = NetnsHandle.current();
  for (const ns of [pair.from, pair.to]) {
    using pod = NetnsHandle.open(netnsPath(ns));
    using eth = inNetns(pod, home, () => EthtoolSocket.open());
    eth.setTxChecksumming('eth0', on);
  }
}

/** One iperf3 TCP stream from `from` to `to` for SECONDS: the receiver's Gbit/s. */
async function iperf(pair: Pair): Promise<number> {
  const server = spawn('ip', ['netns', 'exec', pair.to, 'iperf3', '-s', '-1', '-p', '5301'], {
    stdio: 'ignore',
  });
  try {
    for (let i = 0; ; i++) {
      const out = await must('ip', [
        'netns',
        'exec',
        pair.from,
        'iperf3',
        '-c',
        pair.toIp,
        '-p',
        '5301',
        '-t',
        String(SECONDS),
        '-J',
      ]).catch((err: unknown) => {
        if (i < 20) return undefined; // the server is not listening yet
        throw err;
      });
      if (out === undefined) {
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      const r = JSON.parse(out) as { error?: string; end?: { sum_received?: { bits_per_second: number } } };
      const bps = r.end?.sum_received?.bits_per_second;
      if (bps !== undefined) return bps / 1e9;
      if (i >= 20) throw new Error(`iperf3: ${r.error ?? out.slice(0, 200)}`);
      await new Promise((r) => setTimeout(r, 100)); // the server is not listening yet
    }
  } finally {
    server.kill();
  }
}

async function measure(name: string, pair: Pair): Promise<string> {
  const gbps: Record<Setting, number[]> = { on: [], off: [], hop: [], 'hop+off': [] };
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? SETTINGS : [...SETTINGS].reverse();
    for (const setting of order) {
      setTx(pair, setting === 'on' || setting === 'hop');
      await setHop(pair, setting.startsWith('hop'));
      gbps[setting].push(await iperf(pair));
      process.stderr.write(`${name}: ${setting} ${gbps[setting].at(-1)?.toFixed(2)} Gbit/s\n`);
    }
  }
  await setHop(pair, true);
  const m = (s: Setting) => summarize(gbps[s]).median;
  const figures = SETTINGS.map((s) => `${s} ${m(s).toFixed(2)} (${(m(s) / m('on')).toFixed(2)})`).join(', ');
  return `${name}: Gbit/s (x of on), medians of ${ROUNDS}, ${SECONDS} s each: ${figures}`;
}

async function addPod(
  node: TestNode,
  id: string,
): Promise<{ ns: string; ip: string; host: Pair['hosts'][0] }> {
  const ns = await node.addPod(id);
  const add = await node.cni({ command: 'ADD', containerId: id, netns: ns });
  if (add.code !== 0) throw new Error(`ADD ${id}: ${add.stdout}`);
  const veth = (add.json?.interfaces as Array<{ name: string }> | undefined)?.[0]?.name ?? '';
  return { ns, ip: resultIps(add)[0] as string, host: { nodeNs: node.nodeNs, veth } };
}

async function main(): Promise<void> {
  const lines: string[] = [];
  const node = new TestNode({ datapath: DATAPATH, podCIDRs: ['10.244.41.0/24'] });
  try {
    await node.setup();
    const a = await addPod(node, 'tput-a');
    const b = await addPod(node, 'tput-b');
    lines.push(
      await measure(`${DATAPATH}, pod to pod, one node`, {
        from: a.ns,
        to: b.ns,
        toIp: b.ip,
        hosts: [a.host, b.host],
      }),
    );
  } finally {
    await node.cleanup();
  }
  const cluster = new TestCluster({ nodes: 2, store: 'file', trafficMode: 'encap', datapath: DATAPATH });
  try {
    await cluster.setup();
    const [m0, m1] = cluster.members;
    if (!m0 || !m1) throw new Error('nodes');
    const a = await addPod(m0.node, 'tput-a');
    const b = await addPod(m1.node, 'tput-b');
    lines.push(
      await measure(`${DATAPATH}, pod to pod on another node, VXLAN`, {
        from: a.ns,
        to: b.ns,
        toIp: b.ip,
        hosts: [a.host, b.host],
      }),
    );
  } finally {
    await cluster.cleanup();
  }
  for (const l of lines) console.log(l);
}

await main();
