/**
 * The Linux bridge pod guard's own cost (decision 17): in a throwaway node namespace with the guard's
 * table installed, the time to add one pod's elements (what ADD pays), to check them (CHECK) and to
 * remove them (DEL), over the same NETLINK_NETFILTER socket the agent uses; then, for comparison, the
 * same elements added by an `nft` process (what a spawn per ADD would cost), and the kernel's growth
 * with many pods guarded.
 *
 *   node dist/bench/pod-guard-cost.js [--pods 300] [--spawns 30]
 */
import { parseArgs } from 'node:util';
import { NamespaceSet, netnsPath } from '../bed/namespaces.js';
import {
  addPodGuard,
  missingPodGuard,
  type PodIdentity,
  podGuardKeys,
  podGuardScript,
  removePodGuard,
} from '../src/datapath/linux-bridge/pod-guard.js';
import { NfTables } from '../src/kernel/netlink/nf-tables.js';
import { inNetns, NetnsHandle } from '../src/kernel/netns.js';
import { nftIn } from '../src/kernel/nft.js';
import { run } from '../src/process/run.js';
import { summarize } from './stats.js';

const { values } = parseArgs({ options: { pods: { type: 'string' }, spawns: { type: 'string' } } });
const PODS = Number(values.pods ?? 300);
const SPAWNS = Number(values.spawns ?? 30);

function identity(i: number, dual: boolean): PodIdentity {
  const hi = (i >> 8) & 0xff;
  const lo = i & 0xff;
  const hex = (n: number) => n.toString(16).padStart(2, '0');
  return {
    hostIfname: `pwb${i.toString(16).padStart(8, '0')}`,
    mac: `0a:58:0a:f4:${hex(hi)}:${hex(lo)}`,
    ips: dual
      ? [`10.244.${hi}.${lo}`, `fd00:10:244::${hi.toString(16)}:${lo.toString(16)}`]
      : [`10.244.${hi}.${lo}`],
  };
}

function us(ms: number[]) {
  const s = summarize(ms.map((x) => x * 1000));
  return `median ${s.median.toFixed(0)} µs, p99 ${s.p99.toFixed(0)} µs, min ${s.min.toFixed(0)} µs (n=${s.n})`;
}

/** The nft script text of one pod's elements (for the spawn comparison). */
function nftAddScript(p: PodIdentity): string {
  const v4 = p.ips.filter((ip) => !ip.includes(':'));
  const lines = [
    `add element bridge podwire_pod_guard pod_ports { "${p.hostIfname}" }`,
    `add element bridge podwire_pod_guard pod_arp { ${[...v4, '0.0.0.0'].map((ip) => `"${p.hostIfname}" . ${p.mac} . ${p.mac} . ${ip}`).join(', ')} }`,
    `add element bridge podwire_pod_guard pod_ip4 { ${v4.map((ip) => `"${p.hostIfname}" . ${p.mac} . ${ip}`).join(', ')} }`,
  ];
  return `${lines.join('\n')}\n`;
}

async function main(): Promise<void> {
  const spaces = new NamespaceSet();
  const home = NetnsHandle.current();
  let node: NetnsHandle | undefined;
  let nf: NfTables | undefined;
  try {
    const ns = await spaces.add('guardbench');
    node = NetnsHandle.open(netnsPath(ns));
    const n = node;
    nf = inNetns(n, home, () => NfTables.open());
    await nftIn(ns).apply(podGuardScript());
    // Warm-up: JIT and the kernel's first set growth, untimed.
    for (let i = 0; i < 20; i++) addPodGuard(nf, identity(60000 + i, true));
    for (let i = 0; i < 20; i++) removePodGuard(nf, identity(60000 + i, true));

    for (const dual of [false, true]) {
      const add: number[] = [];
      const check: number[] = [];
      const del: number[] = [];
      const pods = Array.from({ length: PODS }, (_, i) => identity(i + 1, dual));
      for (const p of pods) {
        const t0 = performance.now();
        addPodGuard(nf, p);
        add.push(performance.now() - t0);
      }
      for (const p of pods) {
        const t0 = performance.now();
        if (missingPodGuard(nf, p) !== undefined) throw new Error(`guard of ${p.hostIfname} incomplete`);
        check.push(performance.now() - t0);
      }
      for (const p of pods) {
        const t0 = performance.now();
        removePodGuard(nf, p);
        del.push(performance.now() - t0);
      }
      const elements = podGuardKeys(pods[0] as PodIdentity).reduce((k, g) => k + g.keys.length, 0);
      const kind = dual ? 'dual-stack' : 'IPv4';
      console.log(
        `${kind} pod (${elements} elements), ${PODS} pods added one after another up to ${PODS} guarded:`,
      );
      console.log(`  add (ADD)     ${us(add)}`);
      console.log(`    first 50    ${us(add.slice(0, 50))}`);
      console.log(`    last 50     ${us(add.slice(-50))}`);
      console.log(`  check (CHECK) ${us(check)}`);
      console.log(`  remove (DEL)  ${us(del)}`);
    }

    const spawned: number[] = [];
    const bare: number[] = [];
    for (let i = 0; i < SPAWNS; i++) {
      const p = identity(40000 + i, false);
      let t0 = performance.now();
      const r = await run('ip', ['netns', 'exec', ns, 'nft', '-f', '-'], { input: nftAddScript(p) });
      spawned.push(performance.now() - t0);
      if (r.code !== 0) throw new Error(`nft: ${r.stderr}`);
      t0 = performance.now();
      await run('ip', ['netns', 'exec', ns, 'true']);
      bare.push(performance.now() - t0);
    }
    console.log(`for comparison, the IPv4 elements by an nft process (ip netns exec NODE nft -f -):`);
    console.log(`  nft           ${us(spawned)}`);
    console.log(`  of which ip netns exec NODE true: ${us(bare)}`);
  } finally {
    nf?.close();
    node?.close();
    home.close();
    await spaces.cleanup();
  }
}

await main();
