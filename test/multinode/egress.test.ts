/**
 * Egress masquerade (issue 13 item 1, decision 20), per datapath: two nodes on a static cluster file
 * (so the kept destinations come from the peers' records), a pod on each, and a plain underlay host
 * that has no route to the pod CIDRs. Every server answers with the address it saw the client at
 * (bed/traffic.ts PEER_SERVER), so each assertion is about the source address that arrived.
 *
 * Each test names the product line it depends on; each was checked to fail with that line disabled.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { type ClusterMember, TestCluster } from '../../bed/cluster.js';
import { must, run } from '../../bed/exec.js';
import { metricSample, scrapeMetrics } from '../../bed/metrics.js';
import { ROOT, resultIps } from '../../bed/node.js';
import { ovsAvailable } from '../../bed/ovs.js';
import { PEER_SERVER, peerSeenBy, TcpServers } from '../../bed/traffic.js';
import type { UnderlayNode } from '../../bed/underlay.js';
import { EGRESS_NAT_TABLE, readEgressTable } from '../../src/datapath/egress-masquerade.js';
import { nftIn } from '../../src/kernel/nft.js';
import { reportOvsSkip } from '../datapath/ovs-skip.js';

/** Both datapaths where OVS is installed; `PODWIRE_EGRESS_DATAPATHS=ovs` (say) picks. */
const DATAPATHS = (
  process.env.PODWIRE_EGRESS_DATAPATHS ?? (ovsAvailable() ? 'linux-bridge,ovs' : 'linux-bridge')
).split(',') as Array<'linux-bridge' | 'ovs'>;
const METRICS_PORT = 9178;

/** The podwire_nat tables of a namespace (`nft list tables`), and its masquerade rules. */
async function natState(ns: string): Promise<{ tables: string[]; masqueradeRules: number }> {
  const tables = (await must('ip', ['netns', 'exec', ns, 'nft', 'list', 'tables']))
    .split('\n')
    .filter((l) => l.includes(EGRESS_NAT_TABLE));
  if (tables.length === 0) return { tables, masqueradeRules: 0 };
  const chain = await must('ip', ['netns', 'exec', ns, 'nft', 'list', 'table', 'inet', EGRESS_NAT_TABLE]);
  return { tables, masqueradeRules: chain.split('\n').filter((l) => l.includes(' masquerade')).length };
}

/** Retries `probe` until it returns `want` or 10 s pass (peers' state converges from the store's watch). */
async function eventually<T>(probe: () => Promise<T>, want: T, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = await probe();
    if (got === want || Date.now() > deadline) return got;
    await sleep(200);
  }
}

/** Rewrites a node's agent configuration (null removes a key) and restarts its agent (SIGTERM, start). */
async function restartWith(m: ClusterMember, changes: Record<string, unknown>): Promise<void> {
  const cfg = parseYaml(readFileSync(m.node.configPath, 'utf8')) as Record<string, unknown>;
  for (const [k, v] of Object.entries(changes)) {
    if (v === null) delete cfg[k];
    else cfg[k] = v;
  }
  writeFileSync(m.node.configPath, stringifyYaml(cfg));
  await m.node.stopAgent('SIGTERM');
  await m.node.startAgent();
}

reportOvsSkip('egress masquerade');
for (const datapath of DATAPATHS) {
  describe(`egress masquerade, ${datapath}`, () => {
    const cluster = new TestCluster({
      nodes: 2,
      store: 'file',
      trafficMode: 'encap',
      datapath,
      ipv6: true,
      agentConfig: { metricsAddress: `127.0.0.1:${METRICS_PORT}` },
    });
    const servers = new TcpServers(PEER_SERVER);
    let m0: ClusterMember;
    let m1: ClusterMember;
    let host: UnderlayNode;
    /** A pod on node-0 and one on node-1: namespace, IPv4 and IPv6 address. */
    const a = { ns: '', ip: '', ip6: '' };
    const b = { ns: '', ip: '', ip6: '' };
    /** The underlay carries IPv6 too (added here): node-0, node-1 and the host. */
    const v6 = (n: number) => `fd00:30::${10 + n}`;

    before(async () => {
      await cluster.setup();
      [m0, m1] = cluster.members as [ClusterMember, ClusterMember];
      host = await cluster.underlay.addNode('host');
      for (const [m, pod, id] of [
        [m0, a, 'egress-a'],
        [m1, b, 'egress-b'],
      ] as const) {
        pod.ns = await m.node.addPod('pod');
        const add = await m.node.cni({ command: 'ADD', containerId: id, netns: pod.ns });
        assert.equal(add.code, 0, add.stdout);
        [pod.ip, pod.ip6] = resultIps(add) as [string, string];
      }
      for (const [i, ns] of [m0.underlay.ns, m1.underlay.ns, host.ns].entries())
        await must('ip', ['-n', ns, 'addr', 'add', `${v6(i)}/64`, 'dev', 'eth0', 'nodad']);
      await servers.start([host.ns, b.ns, m0.underlay.ns, m1.underlay.ns]);
    });
    after(async () => {
      await servers.stop();
      await cluster.cleanup();
    });

    // Depends on: the `masquerade` rule of egressMasqueradeScript (src/datapath/egress-masquerade.ts)
    // and its install in startEgress (src/agent/startup/egress-start.ts); the counters on the `count`
    // chain and the metrics gauges (src/agent/ops/metrics-gauges.ts).
    test("a pod reaches an underlay host that has no route to the pods, which sees the node's address; counted", async () => {
      const routes = await must('ip', ['-n', host.ns, 'route', 'show']);
      assert.doesNotMatch(
        routes,
        /10\.250\.|default/,
        `the host must have no way back to the pods: ${routes}`,
      );
      assert.equal(await peerSeenBy(a.ns, host.ip), m0.underlay.ip);
      assert.equal(await peerSeenBy(b.ns, host.ip), m1.underlay.ip);
      const text = await scrapeMetrics(m0.underlay.ns, METRICS_PORT);
      const packets = metricSample(text, 'podwire_egress_masqueraded_packets_total{family="ipv4"}') ?? 0;
      const connections =
        metricSample(text, 'podwire_egress_masqueraded_connections_total{family="ipv4"}') ?? 0;
      const bytes = metricSample(text, 'podwire_egress_masqueraded_bytes_total{family="ipv4"}') ?? 0;
      // One connection: SYN, ACK, FIN, ACK at least leave with the node's address.
      assert.ok(connections >= 1 && packets >= 3 && bytes > 0, text);
    });

    // Depends on: the ip6 `masquerade` rule of egressMasqueradeScript and the peers' IPv6 CIDRs in
    // the kept set.
    test("IPv6: the host sees the node's address; a pod on the other node sees the pod's", async () => {
      const routes = await must('ip', ['-n', host.ns, '-6', 'route', 'show']);
      assert.doesNotMatch(routes, /fd00:10:250|default/, routes);
      assert.equal(await peerSeenBy(a.ns, v6(2)), v6(0));
      assert.equal(await eventually(() => peerSeenBy(a.ns, b.ip6), a.ip6), a.ip6);
      const text = await scrapeMetrics(m0.underlay.ns, METRICS_PORT);
      assert.ok(
        (metricSample(text, 'podwire_egress_masqueraded_packets_total{family="ipv6"}') ?? 0) >= 3,
        text,
      );
    });

    // Depends on: ClusterNode's `onPeers` (src/agent/startup/cluster-node.ts) feeding
    // EgressControl.setPeers: without the peer's CIDR in the kept set, the pod on node-1 would see
    // node-0's address.
    test('a pod reaches a pod on the other node with its own address', async () => {
      assert.equal(await eventually(() => peerSeenBy(a.ns, b.ip), a.ip), a.ip);
    });

    // Local delivery never passes postrouting, so a pod reaching its own node keeps its address with
    // or without the rule; the other node is a destination outside the pod networks (decision 20):
    // depends on the `masquerade` rule (without it node-1 answers the pod through the overlay and
    // sees the pod's address).
    test("a pod reaches its own node with its address, another node with its node's address", async () => {
      assert.equal(await peerSeenBy(a.ns, m0.underlay.ip), a.ip, 'own node, underlay address');
      assert.equal(await peerSeenBy(a.ns, '10.250.0.1'), a.ip, 'own node, gateway address');
      assert.equal(await peerSeenBy(a.ns, m1.underlay.ip), m0.underlay.ip, 'the other node');
    });

    // Depends on: the peers' CIDRs in the kept set (EgressControl.setPeers through ClusterNode's
    // onPeers) and keepSetScript, which replaces the set and leaves the rules alone.
    test('a node joining and leaving changes the kept set, not the rules', {
      skip: datapath === 'ovs' && 'the kept set does not depend on the datapath; run on the Linux bridge',
    }, async () => {
      const nft = nftIn(m0.underlay.ns);
      // The rules with their handles; counters aside (anything may pass meanwhile).
      const rules = async () =>
        (
          await must('ip', [
            'netns',
            'exec',
            m0.underlay.ns,
            'nft',
            '-a',
            'list',
            'chain',
            'inet',
            EGRESS_NAT_TABLE,
            'postrouting',
          ])
        ).replace(/counter packets \d+ bytes \d+/g, 'counter');
      const before = await rules();
      const has = async (cidr: string) => (await readEgressTable(nft))?.keep.includes(cidr) ?? false;
      assert.equal(await has('10.250.1.0/24'), true);
      const joined = await cluster.join();
      assert.equal(await eventually(() => has('10.250.2.0/24'), true), true, 'the new peer is kept');
      await cluster.leave(joined, async () => {});
      assert.equal(await eventually(() => has('10.250.2.0/24'), false), false, 'the peer that left is not');
      assert.equal(await has('10.250.1.0/24'), true);
      assert.equal(await rules(), before, 'rules and their handles unchanged');
    });

    // Depends on: reconcile's `ctx.egress?.ensure()` (src/agent/cni/reconcile.ts) and
    // EgressMasquerade.ensure.
    test('podwire gc reinstates a table someone removed', async () => {
      await must('ip', ['netns', 'exec', m0.underlay.ns, 'nft', 'delete', 'table', 'inet', EGRESS_NAT_TABLE]);
      assert.equal(await peerSeenBy(a.ns, host.ip, 1), undefined, 'without the table the host cannot answer');
      const gc = await run(`${ROOT}/bin/podwire`, ['gc', '--config', m0.node.configPath]);
      assert.equal(gc.code, 0, gc.stderr);
      assert.deepEqual((await natState(m0.underlay.ns)).masqueradeRules, 2);
      assert.equal(await peerSeenBy(a.ns, host.ip), m0.underlay.ip);
      assert.equal(await peerSeenBy(a.ns, b.ip), a.ip, 'reinstated with the kept set it had');
    });

    // Depends on: config.noMasqueradeCIDRs in startEgress's fixed kept destinations.
    test("noMasqueradeCIDRs: the host there sees the pod's address", async () => {
      await restartWith(m0, { noMasqueradeCIDRs: [`${host.ip}/32`] });
      await must('ip', ['-n', host.ns, 'route', 'add', '10.250.0.0/24', 'via', m0.underlay.ip]);
      try {
        assert.equal(await peerSeenBy(a.ns, host.ip), a.ip);
        const status = await run(`${ROOT}/bin/podwire`, ['status', '--config', m0.node.configPath]);
        assert.match(status.stdout, /egress: +masquerade, except to .*172\.30\.0\.12\/32/, status.stdout);
        assert.equal(
          await peerSeenBy(a.ns, m1.underlay.ip),
          m0.underlay.ip,
          'the others are still masqueraded',
        );
      } finally {
        await must('ip', ['-n', host.ns, 'route', 'del', '10.250.0.0/24']);
      }
    });

    // Depends on: startEgress's `if (!config.egressMasquerade)` removing the table and installing none.
    test('egressMasquerade: false: no table, and the host cannot answer', async () => {
      await restartWith(m0, { noMasqueradeCIDRs: null, egressMasquerade: false });
      assert.deepEqual((await natState(m0.underlay.ns)).tables, []);
      const status = await run(`${ROOT}/bin/podwire`, ['status', '--config', m0.node.configPath]);
      assert.match(status.stdout, /egress: +no masquerade/, status.stdout);
      assert.equal(await peerSeenBy(a.ns, host.ip, 1), undefined);
      assert.equal(await peerSeenBy(a.ns, b.ip), a.ip);
    });

    // Depends on: the undo startEgress pushes (`masq.remove()`) and the table replaced whole by
    // egressMasqueradeScript (dropTable first).
    test('stop removes the table; a restart after SIGKILL leaves exactly one', async () => {
      await restartWith(m0, { egressMasquerade: null });
      assert.equal((await natState(m0.underlay.ns)).masqueradeRules, 2);
      await m0.node.stopAgent('SIGKILL');
      assert.equal((await natState(m0.underlay.ns)).tables.length, 1, 'a killed agent leaves its table');
      await m0.node.startAgent();
      assert.deepEqual(await natState(m0.underlay.ns), {
        tables: [`table inet ${EGRESS_NAT_TABLE}`],
        masqueradeRules: 2,
      });
      assert.equal(await peerSeenBy(a.ns, host.ip), m0.underlay.ip);
      assert.equal(await peerSeenBy(a.ns, b.ip), a.ip, 'the kept set carried over and relisted');
      assert.equal(await m0.node.stopAgent('SIGTERM'), 0);
      assert.deepEqual((await natState(m0.underlay.ns)).tables, []);
    });
  });
}

// With clusterCIDRs (etcd leases node CIDRs from them) the whole cluster network is kept from the
// start, before any peer is listed; peers' CIDRs nest inside it and add nothing to the set.
// Depends on: `config.cluster?.pool?.clusterCIDRs` in startEgress's fixed kept destinations.
describe('egress masquerade, etcd store with clusterCIDRs, linux-bridge', () => {
  const cluster = new TestCluster({ nodes: 2, store: 'etcd', trafficMode: 'noEncap' });
  const servers = new TcpServers(PEER_SERVER);
  after(async () => {
    await servers.stop();
    await cluster.cleanup();
  });

  test("the cluster CIDR is kept; a pod on the other node sees the pod's address, the host the node's", async () => {
    await cluster.setup();
    const [m0, m1] = cluster.members as [ClusterMember, ClusterMember];
    const host = await cluster.underlay.addNode('host');
    const pods: Array<{ ns: string; ip: string }> = [];
    for (const [i, m] of [m0, m1].entries()) {
      const ns = await m.node.addPod('pod');
      const add = await m.node.cni({ command: 'ADD', containerId: `egress-etcd-${i}`, netns: ns });
      assert.equal(add.code, 0, add.stdout);
      pods.push({ ns, ip: resultIps(add)[0] as string });
    }
    const [a, b] = pods as [{ ns: string; ip: string }, { ns: string; ip: string }];
    await servers.start([host.ns, b.ns]);
    assert.deepEqual((await readEgressTable(nftIn(m0.underlay.ns)))?.keep, ['10.250.0.0/16']);
    assert.equal(await eventually(() => peerSeenBy(a.ns, b.ip), a.ip), a.ip);
    assert.equal(await peerSeenBy(a.ns, host.ip), m0.underlay.ip);
  });
});
