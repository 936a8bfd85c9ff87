/**
 * The switch restarts under the agent (issue 14): ovs-vswitchd killed with SIGKILL and started again
 * without any flow restore (its flow table comes back empty, its ports forget no-flood), and
 * ovsdb-server killed and started again, while the agent keeps running and pods keep pinging.
 *
 * Depends on: ovs-datapath.ts `#replay` (called from the OpenFlow connection's onUp and from `#db`
 * after an OVSDB reconnect) and `#installAll` (the whole wanted state from OVSDB, no-flood marks
 * included); `#readyFlows` (ADD answers 50 while the switch is away); `#detachPort` (DEL while the
 * switch or OVSDB is away); openflow/connection.ts's reconnect. Without the replay, traffic never
 * comes back after the vswitchd restart and the flow table stays empty.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { TestCluster } from '../../../bed/cluster.js';
import { EMULATED } from '../../../bed/emulation.js';
import { must } from '../../../bed/exec.js';
import { metricSample, scrapeMetrics } from '../../../bed/metrics.js';
import { NamespaceSet, netnsPath } from '../../../bed/namespaces.js';
import { resultIps, type TestNode } from '../../../bed/node.js';
import { OVS_DATAPATH, OvsInstance } from '../../../bed/ovs.js';
import { pingFrom } from '../../../bed/traffic.js';
import { OvsDatapath } from '../../../src/datapath/ovs/ovs-datapath.js';
import { cookieText, podCookie } from '../../../src/datapath/ovs/pipeline.js';
import { Rtnetlink } from '../../../src/kernel/netlink/rtnetlink.js';
import { inNetns, NetnsHandle } from '../../../src/kernel/netns.js';
import { nftIn } from '../../../src/kernel/nft.js';
import { writeSysctl } from '../../../src/kernel/sysctl.js';
import { hostVethOf } from './ovs-node.js';

const METRICS_PORT = 19_741;
const BRIDGE = 'br-podwire';

/** The flow table as ovs-ofctl prints it, without what changes by itself (counters, ages). */
async function flowTable(ovs: OvsInstance): Promise<string[]> {
  const text = await must('ovs-ofctl', ['-O', 'OpenFlow13', '--no-stats', 'dump-flows', ovs.target(BRIDGE)]);
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.startsWith('cookie=') || l.startsWith('table='))
    .sort();
}

/** Polls until `fn` holds or `ms` pass; resolves with the time it took, or undefined. */
/**
 * How soon traffic must be back and an ADD answered: 2 s, the contract, on this machine (OVS's
 * userspace datapath in `npm test`). The kernel datapath runs only in the emulated guest of `npm run
 * test:vm`, where a ping round alone takes hundreds of milliseconds and the machine's other work
 * stretches them further (2347 ms measured once beside two benchmarks): there the bound is 5 s, and
 * what the guest proves is the rest (traffic back, the same flow table, 50 during the outage).
 */
const RESTORE_MS = EMULATED ? 5000 : 2000;

async function within(ms: number, fn: () => Promise<boolean>): Promise<number | undefined> {
  const start = performance.now();
  while (performance.now() - start < ms) {
    if (await fn()) return performance.now() - start;
    await sleep(20);
  }
  return undefined;
}

/** Pings every 50 ms in the background; `stop` resolves with replies received and sent. */
function keepPinging(ns: string, ip: string): { stop(): Promise<{ sent: number; received: number }> } {
  let running = true;
  let sent = 0;
  let received = 0;
  const deadline = performance.now() + 60_000; // never outlives a test that forgot to stop it
  const loop = (async () => {
    while (running && performance.now() < deadline) {
      sent++;
      if (await pingFrom(ns, ip, 0.2)) received++;
      await sleep(50);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { sent, received };
    },
  };
}

describe(`OVS switch restarts under a running agent (${OVS_DATAPATH})`, () => {
  const cluster = new TestCluster({
    nodes: 2,
    store: 'file',
    trafficMode: 'noEncap',
    datapath: 'ovs',
    agentConfig: { metricsAddress: `127.0.0.1:${METRICS_PORT}` },
  });
  let node: TestNode;
  let ovs: OvsInstance;
  let nodeNs: string;
  const pods = new Map<string, { ns: string; ip: string; veth: string }>();

  const add = async (on: TestNode, id: string) => {
    const ns = await on.addPod(id);
    const r = await on.cni({ command: 'ADD', containerId: id, netns: ns });
    return { r, ns };
  };

  before(async () => {
    await cluster.setup();
    const [a, b] = cluster.members;
    if (!a?.node.ovs || !b) throw new Error('nodes');
    node = a.node;
    ovs = a.node.ovs;
    nodeNs = a.underlay.ns;
    for (const [id, on] of [
      ['a', a.node],
      ['b', a.node],
      ['c', b.node],
    ] as const) {
      const { r, ns } = await add(on, id);
      assert.equal(r.code, 0, r.stdout);
      pods.set(id, { ns, ip: resultIps(r)[0] as string, veth: hostVethOf(r) });
    }
  });
  after(() => cluster.cleanup());

  const pod = (id: string) => pods.get(id) as { ns: string; ip: string; veth: string };
  const reachesAll = async () =>
    (await pingFrom(pod('a').ns, pod('b').ip, 0.3)) && (await pingFrom(pod('a').ns, pod('c').ip, 0.3));

  test('pods reach each other, on the node and across nodes', async () => {
    assert.ok(await within(10_000, reachesAll), 'a reaches b and c');
  });

  for (const daemon of ['ovs-vswitchd', 'ovsdb-server'] as const) {
    test(`${daemon} killed and restarted: traffic back within ${RESTORE_MS / 1000} s, same flow table, ADD 50 meanwhile, DEL works`, async (t) => {
      // A pod that goes away while the daemon is down.
      const gone = await add(node, `gone-${daemon}`);
      assert.equal(gone.r.code, 0, gone.r.stdout);
      const goneVeth = hostVethOf(gone.r);
      const goneCookie = `cookie=${cookieText(podCookie(goneVeth))},`;
      const before = await flowTable(ovs);
      assert.ok(
        before.some((l) => l.includes(goneCookie)),
        'the pod that goes away has flows',
      );
      const metricsBefore = await scrapeMetrics(nodeNs, METRICS_PORT);
      const pings = [keepPinging(pod('a').ns, pod('b').ip), keepPinging(pod('a').ns, pod('c').ip)];
      const stopPings = () => Promise.all(pings.map((p) => p.stop()));
      try {
        await ovs.killDaemon(daemon);
        // ADD answers 50 ("try again later") at once instead of hanging.
        const logFrom = node.logs.length;
        const started = performance.now();
        const during = await add(node, `during-${daemon}`);
        const took = performance.now() - started;
        assert.equal(during.r.code, 1, during.r.stdout);
        assert.equal((during.r.json as { code?: number }).code, 50, during.r.stdout);
        assert.ok(
          took < RESTORE_MS,
          `ADD during the outage answered in ${Math.round(took)} ms: ${node.logs.slice(logFrom)}`,
        );
        // DEL still succeeds.
        const del = await node.cni({ command: 'DEL', containerId: `gone-${daemon}`, netns: gone.ns });
        assert.equal(del.code, 0, del.stdout);

        await ovs.startDaemon(daemon);
        const back = await within(RESTORE_MS * 2.5, reachesAll);
        const counts = await stopPings();
        assert.ok(
          back !== undefined,
          `traffic back after ${daemon} restart (pings ${JSON.stringify(counts)})`,
        );
        assert.ok(back < RESTORE_MS, `traffic back ${Math.round(back)} ms after ${daemon} was up`);
        t.diagnostic(
          `ADD during the outage answered 50 in ${Math.round(took)} ms; traffic back ${Math.round(back)} ms after ${daemon} was up; pings ${JSON.stringify(counts)}`,
        );

        // The same flows as before, less the deleted pod's (its cookie is derived from its veth).
        const want = before.filter((l) => !l.includes(goneCookie));
        let now: string[] = [];
        const equal = await within(5000, async () => {
          now = await flowTable(ovs);
          return now.join('\n') === want.join('\n');
        });
        assert.deepEqual(equal === undefined ? now : want, want, 'the flow table after the restart');
        // The deleted pod's port is gone from OVSDB (its removal waited for ovsdb-server).
        assert.ok(
          await within(
            5000,
            async () => !(await ovs.vsctl('list-ports', BRIDGE)).split('\n').includes(goneVeth),
          ),
          `${goneVeth} removed from ${BRIDGE}`,
        );

        // The ADD made during the outage succeeds when retried.
        const retry = await node.cni({ command: 'ADD', containerId: `during-${daemon}`, netns: during.ns });
        assert.equal(retry.code, 0, retry.stdout);
        const metricsAfter = await scrapeMetrics(nodeNs, METRICS_PORT);
        const series = `podwire_datapath_reconnects_total{connection="${daemon === 'ovs-vswitchd' ? 'openflow' : 'ovsdb'}"}`;
        assert.ok(
          (metricSample(metricsAfter, series) ?? 0) > (metricSample(metricsBefore, series) ?? 0),
          `${series} counted the reconnect`,
        );
        assert.ok(
          (metricSample(metricsAfter, 'podwire_datapath_replays_total') ?? 0) >
            (metricSample(metricsBefore, 'podwire_datapath_replays_total') ?? 0),
          'the replay is counted',
        );
        const del2 = await node.cni({ command: 'DEL', containerId: `during-${daemon}`, netns: during.ns });
        assert.equal(del2.code, 0, del2.stdout);
      } finally {
        await stopPings(); // the loops end whatever the assertions said
      }
    });
  }
});

describe(`OVS switch restart: VLAN pods and the uplink get their no-flood mark back (${OVS_DATAPATH})`, () => {
  const spaces = new NamespaceSet();
  let ovs: OvsInstance | undefined;
  let nl: Rtnetlink | undefined;
  let dp: OvsDatapath | undefined;
  const handles: NetnsHandle[] = [];

  after(async () => {
    await dp?.stop();
    await ovs?.stop();
    nl?.close();
    for (const h of handles) h.close();
    await spaces.cleanup();
  });

  // The uplink's mark keeps a plain pod's floods off the underlay (decision 30): `#installAll` sets it.
  test('a restarted ovs-vswitchd forgets no-flood; the replay sets it again and CHECK passes', async () => {
    const nodeNs = await spaces.add('nf');
    const podNs = await spaces.add('nfpod');
    const home = NetnsHandle.current();
    handles.push(home);
    const node = NetnsHandle.open(netnsPath(nodeNs));
    handles.push(node);
    nl = inNetns(node, home, () => Rtnetlink.open());
    ovs = await OvsInstance.start(nodeNs);
    dp = new OvsDatapath({
      nl,
      sysctl: (key, value) => inNetns(node, home, () => writeSysctl(key, value)),
      nft: nftIn(nodeNs),
      gateways: [{ family: 4, address: '10.251.0.1', prefixLength: 24 }],
      mtu: 1500,
      bridge: BRIDGE,
      gateway: 'pwtgw-nf',
      ovsdb: ovs.ovsdb,
      datapathType: OVS_DATAPATH,
    });
    await dp.start();
    using pod = NetnsHandle.open(netnsPath(podNs));
    const host = nl.addVeth({ name: 'pwtnf0', peerName: 'eth0', mtu: 1500, peerNetnsFd: pod.fd });
    await dp.attachPort({
      hostIfname: 'pwtnf0',
      hostIfindex: host.index,
      containerId: 'vlan-pod',
      ifname: 'eth0',
      podMac: '0a:58:0a:fb:00:05',
      podIps: ['10.251.0.5'],
      vlan: 100,
    });
    const up = nl.addVeth({ name: 'pwtnfup', peerName: 'pwtnfwire', mtu: 1500 });
    const gwMac = nl.linkByName('pwtgw-nf')?.mac ?? '';
    await dp.attachUplink({ ifname: 'pwtnfup', index: up.index, mac: up.mac ?? '', ips: ['192.0.2.30'] });
    const noFlood = async (port: string) => {
      const show = await must('ovs-ofctl', ['-O', 'OpenFlow10', 'show', (ovs as OvsInstance).target(BRIDGE)]);
      const at = show.indexOf(`(${port}):`);
      return /config:[^\n]*NO_FLOOD/.test(show.slice(at, show.indexOf('state:', at)));
    };
    const both = async () => (await noFlood('pwtnf0')) && (await noFlood('pwtnfup'));
    assert.ok(await noFlood('pwtnf0'), 'the VLAN pod port is no-flood after ADD');
    assert.ok(await noFlood('pwtnfup'), 'the uplink is no-flood once attached');
    await ovs.restartVswitchd();
    const ready = await within(5000, async () => (dp as OvsDatapath).status().ready && (await both()));
    assert.ok(ready !== undefined, 'no-flood is back on both once the datapath is ready again');
    await dp.checkPort('pwtnf0');
    await dp.detachPort('pwtnf0');
    await dp.detachUplink({ ifname: 'pwtnfup', index: up.index, targetMac: gwMac });
    nl.deleteLinkByName('pwtnf0');
    nl.deleteLinkByName('pwtnfup');
  });
});
