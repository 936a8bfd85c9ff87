/**
 * Bridging mode (issue 5), per datapath: each node's uplink joins its pod bridge and the node's
 * address, MAC and routes move to the bridge interface.
 *
 * - failure 2 (docs/architecture.md) as reported: a pod of node A (A's pod CIDR) pings A's underlay IP while node B
 *   pings A every 0.2 s for 20 s, and A keeps re-resolving the pod: 0 lost, B's neighbour entry for A
 *   is always A's uplink MAC, and `podwire arp audit` on the underlay finds nothing.
 * - Pool pods on A and B reach each other, both nodes and a plain underlay host.
 * - Agent stop and start with the uplink moved: the node's own connectivity loses at most 1 s at
 *   each transition; after the stop the uplink is exactly as before.
 */

import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { startArpAudit } from '../../bed/arp-audit-run.js';
import { TestCluster } from '../../bed/cluster.js';
import { ipJson, must, type Run, run } from '../../bed/exec.js';
import { type CniOutcome, resultIps } from '../../bed/node.js';
import { ovsAvailable } from '../../bed/ovs.js';
import { pingFrom } from '../../bed/traffic.js';
import { UNDERLAY_BRIDGE, type UnderlayNode } from '../../bed/underlay.js';
import { VlanRouter } from '../../bed/vlan-router.js';
import { hostVethName } from '../../src/agent/cni/host-veth.js';
import { controlSocketPath } from '../../src/agent/ops/control-server.js';
import type { AuditReport } from '../../src/arp/audit.js';
import { EtcdStore } from '../../src/cluster/etcd-store.js';

/** Both datapaths where OVS is installed; `PODWIRE_BRIDGING_DATAPATHS=ovs` (say) picks. */
const DATAPATHS = (process.env.PODWIRE_BRIDGING_DATAPATHS ?? 'linux-bridge,ovs').split(',') as Array<
  'linux-bridge' | 'ovs'
>;
/** Why a datapath's suite is skipped, reported as the skip's reason; never a silent disappearance. */
const SKIP: Partial<Record<'linux-bridge' | 'ovs', string>> = ovsAvailable()
  ? {}
  : { ovs: 'Open vSwitch is not installed (ovs-vswitchd, ovsdb-server): the OVS half needs it' };

interface LinkView {
  mac: string;
  mtu: number;
  master: string | undefined;
  addrs: string[];
  routes: string[];
  /** `nft list tables` of the node: what the userspace OVS datapath adds on the uplink's ingress. */
  nft: string;
}

/** What "the uplink exactly as before" compares: MAC, MTU, master, addresses, routes through it. */
async function uplinkView(ns: string): Promise<LinkView> {
  const [l] = await ipJson<
    Array<{
      address: string;
      mtu: number;
      master?: string;
      addr_info: Array<{ local: string; prefixlen: number; scope: string }>;
    }>
  >(ns, ['addr', 'show', 'eth0']);
  const routes = await ipJson<Array<Record<string, unknown>>>(ns, ['route', 'show', 'dev', 'eth0']);
  return {
    mac: l?.address ?? '',
    mtu: l?.mtu ?? 0,
    master: l?.master,
    addrs: (l?.addr_info ?? []).filter((a) => a.scope === 'global').map((a) => `${a.local}/${a.prefixlen}`),
    routes: routes.map((r) => JSON.stringify(r)).sort(),
    nft: (await run('ip', ['netns', 'exec', ns, 'nft', 'list', 'tables'])).stdout,
  };
}

/** `podwire arp audit` on the underlay bridge for `seconds`; `ready` once its capture is open. */
function startAudit(
  underlayNs: string,
  socket: string,
  seconds: number,
): { ready: Promise<void>; done: Promise<Run> } {
  return startArpAudit(underlayNs, [
    '--interface',
    UNDERLAY_BRIDGE,
    '--seconds',
    String(seconds),
    '--json',
    '--socket',
    socket,
  ]);
}

interface PingTally {
  sent: number;
  received: number;
  /** Replies that came twice: the node answered both through the bridge and on the bare uplink. */
  duplicates: number;
  /** Sequence numbers (from 1, sent `interval` apart) that got no reply. */
  lost: number[];
}

/**
 * `ping -c N -i I`: which probes got a reply. A deadline (`-w`) rather than `-W`, which waits only two
 * round trips for the last reply: on a loaded machine a late reply would count as lost. With `-w`,
 * ping sends more than N probes when some go unanswered.
 */
async function pingCount(ns: string, ip: string, count: number, interval: number): Promise<PingTally> {
  const r = await run('ip', [
    'netns',
    'exec',
    ns,
    'ping',
    '-n',
    '-c',
    String(count),
    '-i',
    String(interval),
    '-w',
    String(Math.ceil(count * interval) + 3),
    ip,
  ]);
  const m = /(\d+) packets transmitted, (\d+) received(?:, \+(\d+) duplicates)?/.exec(r.stdout);
  const answered = new Set([...r.stdout.matchAll(/icmp_seq=(\d+)/g)].map((x) => Number(x[1])));
  const sent = Number(m?.[1] ?? 0);
  const lost: number[] = [];
  for (let seq = 1; seq <= sent; seq++) if (!answered.has(seq)) lost.push(seq);
  return { sent, received: Number(m?.[2] ?? 0), duplicates: Number(m?.[3] ?? 0), lost };
}

type Member = TestCluster['members'][number];

/** ADD with CNI_ARGS (a pool's name); no retry: a store timeout (107) is a failure. */
function addWithArgs(m: Member, id: string, ns: string, cniArgs: string): Promise<CniOutcome> {
  return m.node.cni({ command: 'ADD', containerId: id, netns: ns, env: { CNI_ARGS: cniArgs } });
}

/** Whether the kernel's bridge can filter VLANs (CONFIG_BRIDGE_VLAN_FILTERING), asked in `ns`. */
async function kernelFiltersVlans(ns: string): Promise<boolean> {
  const r = await run('ip', [
    '-n',
    ns,
    'link',
    'add',
    'pwt-vlanprobe',
    'type',
    'bridge',
    'vlan_filtering',
    '1',
  ]);
  if (r.code === 0) await must('ip', ['-n', ns, 'link', 'del', 'pwt-vlanprobe']);
  return r.code === 0;
}

/** Whether one of `tries` pings gets an answer. */
async function reaches(ns: string, ip: string, tries: number): Promise<boolean> {
  for (let i = 0; i < tries; i++) if (await pingFrom(ns, ip, 1)) return true;
  return false;
}

for (const datapath of DATAPATHS) {
  describe(`bridging mode, ${datapath}`, { skip: SKIP[datapath] ?? false }, () => {
    if (SKIP[datapath]) return; // nothing made for a skipped suite (the cluster makes a directory)
    const cluster = new TestCluster({
      nodes: 2,
      store: 'etcd',
      trafficMode: 'noEncap',
      datapath,
      bridging: true,
    });
    let found: LinkView;
    let host: UnderlayNode;
    let store: EtcdStore;

    before(async () => {
      await cluster.setup();
      host = await cluster.underlay.addNode('host');
      const etcd = cluster.etcd;
      if (!etcd) throw new Error('etcd');
      store = await EtcdStore.open({
        endpoints: [etcd.endpoint],
        connect: etcd.connect,
        requestTimeoutMs: 8000,
      });
    });
    after(async () => {
      await store?.close();
      await cluster.cleanup();
    });

    test('the uplink is a port of the bridge; the bridge interface has the node IP and the uplink MAC', async () => {
      const a = cluster.members[0];
      if (!a) throw new Error('node');
      const view = await uplinkView(a.underlay.ns);
      if (a.node.ovs) {
        // The userspace datapath reads its ports through packet sockets: no kernel master.
        const ports = (await a.node.ovs.vsctl('list-ports', 'br-podwire')).split('\n');
        assert.ok(ports.includes('eth0'), `eth0 is a port of br-podwire: ${ports.join(' ')}`);
      } else assert.ok(view.master, 'eth0 has a master');
      assert.deepEqual(view.addrs, []);
      const gw = datapath === 'ovs' ? 'podwire-gw0' : 'podwire0';
      const [g] = await ipJson<Array<{ address: string; addr_info: Array<{ local: string }> }>>(
        a.underlay.ns,
        ['addr', 'show', gw],
      );
      assert.equal(g?.address, view.mac);
      assert.ok(
        g?.addr_info.some((x) => x.local === a.underlay.ip),
        JSON.stringify(g),
      );
      found = view; // eth0's MAC and MTU as the agent found them (no master, addresses: checked below)
    });

    test('failure 2 as reported: pod pings its node while B pings A every 0.2 s for 20 s: 0 lost, no leak', async () => {
      const [a, b] = cluster.members;
      if (!a || !b) throw new Error('nodes');
      const podNs = await a.node.addPod('f2');
      const add = await a.node.cni({ command: 'ADD', containerId: 'f2-pod', netns: podNs });
      assert.equal(add.code, 0, add.stdout);
      const podIp = resultIps(add)[0] as string;
      const aMac = found.mac;
      const audit = startAudit(cluster.underlay.ns, controlSocketPath(a.node.socket), 22);
      await audit.ready;
      const stop = AbortSignal.timeout(21_000);
      const seen = new Map<string, number>();
      const sampler = (async () => {
        while (!stop.aborted) {
          const n = await ipJson<Array<{ lladdr?: string; state?: string[] }>>(b.underlay.ns, [
            'neigh',
            'show',
            a.underlay.ip,
          ]);
          const mac = n[0]?.lladdr ?? '(none)';
          seen.set(mac, (seen.get(mac) ?? 0) + 1);
          await sleep(200);
        }
      })();
      // A forgets the pod every second: each time it asks for it again (the ARP that leaked in failure 2).
      const flusher = (async () => {
        const gw = datapath === 'ovs' ? 'podwire-gw0' : 'podwire0';
        while (!stop.aborted) {
          await run('ip', ['-n', a.underlay.ns, 'neigh', 'del', podIp, 'dev', gw]);
          await sleep(1000);
        }
      })();
      const [fromPod, fromB] = await Promise.all([
        pingCount(podNs, a.underlay.ip, 100, 0.2),
        pingCount(b.underlay.ns, a.underlay.ip, 100, 0.2),
      ]);
      await Promise.all([sampler, flusher]);
      const report = await audit.done;
      console.log(
        `${datapath}: pod->A ${fromPod.received}/${fromPod.sent}, B->A ${fromB.received}/${fromB.sent}, B's entries for A ${JSON.stringify(Object.fromEntries(seen))}`,
      );
      const lostB = `B's pings lost: ${JSON.stringify(fromB.lost)} of ${fromB.sent}`;
      assert.equal(fromB.received, 100, `B lost none of its pings to A (${lostB})`);
      assert.equal(fromB.sent, 100, lostB);
      assert.equal(fromB.duplicates, 0, 'A answered each of the pings of B once');
      assert.equal(
        fromPod.received,
        100,
        `the pod lost none of its pings to A (lost: ${JSON.stringify(fromPod.lost)})`,
      );
      assert.deepEqual(
        [...seen.keys()].filter((m) => m !== aMac && m !== '(none)'),
        [],
        "B's entry for A was never another MAC",
      );
      assert.ok((seen.get(aMac) ?? 0) > 50, JSON.stringify(Object.fromEntries(seen)));
      assert.equal(report.code, 0, report.stdout + report.stderr);
      const r = JSON.parse(report.stdout) as AuditReport;
      assert.deepEqual(r.violations, []);
      assert.ok(
        r.rows.some((x) => x.senderIp === a.underlay.ip && x.verdict === 'ok'),
        JSON.stringify(r.rows),
      );
      assert.equal((await a.node.cni({ command: 'DEL', containerId: 'f2-pod', netns: podNs })).code, 0);
    });

    test('pool pods on A and B reach each other, both nodes and a plain underlay host', async () => {
      const [a, b] = cluster.members;
      if (!a || !b) throw new Error('nodes');
      await store.pools.createPool({
        name: 'flat',
        ranges: ['172.30.0.100-172.30.0.119'],
        subnet: { gateway: '172.30.0.254', prefixLength: 24 },
        vlan: 0,
      });
      const pods: Array<{ ns: string; ip: string; node: typeof a; id: string }> = [];
      for (const m of [a, b]) {
        const ns = await m.node.addPod('flat');
        const id = `flat-${m.name}`;
        const add = await addWithArgs(m, id, ns, 'PODWIRE_POOL=flat');
        assert.equal(add.code, 0, `${m.name}: ${add.stdout}`);
        pods.push({ ns, ip: resultIps(add)[0] as string, node: m, id });
      }
      const [pa, pb] = pods;
      if (!pa || !pb) throw new Error('pods');
      const failures: string[] = [];
      const check = async (from: string, ns: string, to: string) => {
        if (!(await pingFrom(ns, to, 2))) failures.push(`${from} -> ${to}`);
      };
      await Promise.all([
        check('podA', pa.ns, pb.ip),
        check('podB', pb.ns, pa.ip),
        check('podA', pa.ns, a.underlay.ip),
        check('podA', pa.ns, b.underlay.ip),
        check('podB', pb.ns, a.underlay.ip),
        check('podA', pa.ns, host.ip),
        check('podA', pa.ns, '172.30.0.254'),
        check('host', host.ns, pa.ip),
        check('host', host.ns, pb.ip),
        check('nodeB', b.underlay.ns, pa.ip),
      ]);
      assert.deepEqual(failures, []);
      for (const p of pods)
        assert.equal((await p.node.node.cni({ command: 'DEL', containerId: p.id, netns: p.ns })).code, 0);
      await store.pools.deletePool('flat');
    });

    test('pool pods of a VLAN reach each other, both nodes and a host through the VLAN router; VLANs are isolated', async () => {
      const [a, b] = cluster.members;
      if (!a || !b) throw new Error('nodes');
      const subnet = { gateway: '10.100.0.1', prefixLength: 24 };
      // Two VLANs over one subnet and gateway address: only the tag keeps them apart.
      await store.pools.createPool({ name: 'blue', ranges: ['10.100.0.10-10.100.0.19'], subnet, vlan: 100 });
      await store.pools.createPool({ name: 'red', ranges: ['10.100.0.20-10.100.0.29'], subnet, vlan: 200 });
      const pods: Array<{ ns: string; ip: string; node: typeof a; id: string; result: unknown }> = [];
      const add = async (m: typeof a, pool: string) => {
        const ns = await m.node.addPod(pool);
        const id = `${pool}-${m.name}`;
        const r = await addWithArgs(m, id, ns, `PODWIRE_POOL=${pool}`);
        if (r.code === 0) pods.push({ ns, ip: resultIps(r)[0] as string, node: m, id, result: r.json });
        return r;
      };
      let router: VlanRouter | undefined;
      let plain: { stop(): Promise<void> } | undefined;
      const routes = [a, b].map((m) => ['-n', m.underlay.ns, 'route', '10.100.0.0/24', 'via', host.ip]);
      try {
        if (datapath === 'linux-bridge' && !(await kernelFiltersVlans(a.underlay.ns))) {
          // This kernel's bridge cannot filter VLANs: the ADD is refused, clearly, and holds nothing.
          const r = await add(a, 'blue');
          assert.equal(r.code, 1, r.stdout);
          const err = r.json as { code?: number; msg?: string };
          assert.equal(err.code, 106, r.stdout);
          assert.match(err.msg ?? '', /CONFIG_BRIDGE_VLAN_FILTERING/);
          assert.deepEqual(await store.pools.claims('blue'), [], 'the address went back to the pool');
          return;
        }
        router = await VlanRouter.start(cluster.underlay, host, 100, '10.100.0.1/24');
        // An untagged host on the same subnet: a VLAN pod that reached it would have leaked untagged.
        const untagged = await cluster.underlay.addNode('plain');
        plain = { stop: () => cluster.underlay.removeNode(untagged) };
        await must('ip', ['-n', untagged.ns, 'addr', 'add', '10.100.0.250/24', 'dev', 'eth0']);
        for (const r of routes) await must('ip', [...r.slice(0, 3), 'add', ...r.slice(3)]);
        for (const [m, pool] of [
          [a, 'blue'],
          [b, 'blue'],
          [a, 'red'],
        ] as const) {
          const r = await add(m, pool);
          assert.equal(r.code, 0, `${m.name} ${pool}: ${r.stdout}`);
        }
        const [a100, b100, a200] = pods;
        if (!a100 || !b100 || !a200) throw new Error('pods');
        const failures: string[] = [];
        const check = async (from: string, ns: string, to: string, want: boolean) => {
          if ((await reaches(ns, to, want ? 3 : 1)) !== want) failures.push(`${from} -> ${to}: ${!want}`);
        };
        await Promise.all([
          check('a100', a100.ns, b100.ip, true),
          check('b100', b100.ns, a100.ip, true),
          check('a100', a100.ns, '10.100.0.1', true),
          check('a100', a100.ns, a.underlay.ip, true),
          check('a100', a100.ns, b.underlay.ip, true),
          check('b100', b100.ns, host.ip, true),
          check('nodeB', b.underlay.ns, a100.ip, true),
        ]);
        await Promise.all([
          check('a100', a100.ns, a200.ip, false),
          check('b100', b100.ns, a200.ip, false),
          check('a200', a200.ns, '10.100.0.1', false),
          check('a200', a200.ns, a.underlay.ip, false),
          check('a100', a100.ns, '10.100.0.250', false),
          check('a200', a200.ns, '10.100.0.250', false),
        ]);
        assert.deepEqual(failures, []);
        if (a.node.ovs) {
          // CHECK sees the port's no-flood mark, which a restarted ovs-vswitchd would have forgotten.
          const check = () =>
            a.node.cni({
              command: 'CHECK',
              containerId: a100.id,
              netns: a100.ns,
              env: { CNI_ARGS: 'PODWIRE_POOL=blue' },
              conf: { prevResult: a100.result },
            });
          assert.equal((await check()).code, 0, 'CHECK passes with the port no-flood');
          const veth = hostVethName(a100.id, 'eth0');
          const modPort = (how: string) =>
            must('ovs-ofctl', [
              '-O',
              'OpenFlow10',
              'mod-port',
              a.node.ovs?.target('br-podwire') ?? '',
              veth,
              how,
            ]);
          await modPort('flood');
          const drift = await check();
          assert.equal((drift.json as { code?: number } | undefined)?.code, 104, drift.stdout);
          assert.match(drift.stdout, /not marked no-flood/);
          await modPort('no-flood');
        }
      } finally {
        // The router's daemons are this test's own (the cluster's cleanup does not know them): they
        // stop whatever the DELs say.
        const dels = [];
        try {
          for (const p of pods.reverse())
            dels.push(await p.node.node.cni({ command: 'DEL', containerId: p.id, netns: p.ns }));
          if (router) for (const r of routes) await run('ip', [...r.slice(0, 3), 'del', ...r.slice(3)]);
        } finally {
          await router?.stop();
          await plain?.stop();
        }
        for (const r of dels) assert.equal(r.code, 0, r.stdout);
        await store.pools.deletePool('blue');
        await store.pools.deletePool('red');
      }
    });

    test('a pool pod whose OVS port record is gone is not re-attached untagged at restart', {
      skip: datapath !== 'ovs' && "OVS only: the Linux bridge keeps a port's VLANs in the kernel",
    }, async () => {
      const [a] = cluster.members;
      if (!a?.node.ovs) throw new Error('node');
      await store.pools.createPool({
        name: 'lost',
        ranges: ['10.101.0.10-10.101.0.19'],
        subnet: { gateway: '10.101.0.1', prefixLength: 24 },
        vlan: 101,
      });
      const ns = await a.node.addPod('lost');
      const add = await addWithArgs(a, 'lost-pod', ns, 'PODWIRE_POOL=lost');
      assert.equal(add.code, 0, add.stdout);
      const veth = hostVethName('lost-pod', 'eth0');
      try {
        await a.node.stopAgent('SIGTERM');
        // OVSDB loses the port (say, it was reset); the veth and the claim stay.
        await a.node.ovs.vsctl('del-port', 'br-podwire', veth);
        const from = a.node.logs.length;
        await a.node.startAgent();
        assert.match(a.node.logs.slice(from), /not re-attaching a pool pod/);
        const ports = (await a.node.ovs.vsctl('list-ports', 'br-podwire')).split('\n');
        assert.ok(!ports.includes(veth), 'the pod stays detached rather than joining the untagged L2');
      } finally {
        const del = await a.node.cni({ command: 'DEL', containerId: 'lost-pod', netns: ns });
        assert.equal(del.code, 0, del.stdout);
        await store.pools.deletePool('lost');
      }
    });

    test('agent stop and start: at most 1 s lost at each transition; the uplink restored exactly', async () => {
      const [a, b] = cluster.members;
      if (!a || !b) throw new Error('nodes');
      // 0.05 s apart for 8 s: 160 probes across both transitions.
      const t0 = performance.now();
      const probes = pingCount(b.underlay.ns, a.underlay.ip, 160, 0.05);
      await sleep(1500);
      await a.node.stopAgent('SIGTERM');
      const stopped = await uplinkView(a.underlay.ns);
      const stoppedPorts = a.node.ovs ? (await a.node.ovs.vsctl('list-ports', 'br-podwire')).split('\n') : [];
      await sleep(2000);
      // Probes sent before this point belong to the stop, later ones to the start.
      const between = (performance.now() - t0) / 1000;
      await a.node.startAgent();
      const p = await probes;
      const atStop = p.lost.filter((seq) => (seq - 1) * 0.05 < between).length;
      const atStart = p.lost.length - atStop;
      console.log(
        `${datapath}: probes 0.05 s apart lost at the stop ${atStop}, at the start ${atStart} (of ${p.sent}); duplicates ${p.duplicates}`,
      );
      assert.ok(p.sent >= 160, `sent ${p.sent}`); // more when some went unanswered (-w)
      assert.ok(atStop * 0.05 <= 1, `lost ${atStop} probes (${atStop * 0.05} s) at the stop`);
      assert.ok(atStart * 0.05 <= 1, `lost ${atStart} probes (${atStart * 0.05} s) at the start`);
      if (a.node.ovs)
        assert.ok(!stoppedPorts.includes('eth0'), `eth0 left br-podwire: ${stoppedPorts.join(' ')}`);
      else assert.equal(stopped.master, undefined, 'eth0 left the bridge');
      assert.doesNotMatch(stopped.nft, /podwire_uplink/, 'no nftables chain left on the uplink');
      assert.deepEqual(stopped.addrs, [`${a.underlay.ip}/24`]);
      assert.equal(stopped.mac, found.mac);
      assert.equal(stopped.mtu, found.mtu);
      // Only the prefix route, as the bed made it.
      assert.deepEqual(
        stopped.routes
          .map((r) => JSON.parse(r) as { dst: string; prefsrc: string; protocol: string })
          .map((r) => [r.dst, r.prefsrc, r.protocol]),
        [['172.30.0.0/24', a.underlay.ip, 'kernel']],
      );
    });

    test('killed with the uplink moved, then started without bridging: the uplink comes back anyway', async () => {
      const [a] = cluster.members;
      if (!a) throw new Error('node');
      const config = readFileSync(a.node.configPath, 'utf8');
      await a.node.stopAgent('SIGKILL');
      try {
        const moved = await uplinkView(a.underlay.ns);
        assert.deepEqual(moved.addrs, [], 'killed: the uplink is still moved');
        const without = parseYaml(config) as Record<string, unknown>;
        delete without.bridging;
        writeFileSync(a.node.configPath, stringifyYaml(without));
        await a.node.startAgent();
        const back = await uplinkView(a.underlay.ns);
        assert.deepEqual(back.addrs, [`${a.underlay.ip}/24`]);
        assert.equal(back.mac, found.mac);
        assert.doesNotMatch(back.nft, /podwire_uplink/);
        if (a.node.ovs) {
          const ports = (await a.node.ovs.vsctl('list-ports', 'br-podwire')).split('\n');
          assert.ok(!ports.includes('eth0'), `eth0 left br-podwire: ${ports.join(' ')}`);
        } else assert.equal(back.master, undefined);
      } finally {
        await a.node.stopAgent('SIGTERM');
        writeFileSync(a.node.configPath, config);
      }
    });
  });
}
