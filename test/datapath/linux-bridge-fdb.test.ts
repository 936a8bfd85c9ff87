/**
 * The Linux bridge sends a pod's port only what is for the pod (decision 26): a static forwarding
 * entry for the pod's MAC on its host veth, and no unknown unicast (`flood off`). Without them a pod
 * silent for longer than the bridge's ageing time (300 s) loses its learned entry, and unicast for it
 * is flooded to every other pod of the node until it speaks again. Broadcast and multicast (ARP, ND)
 * still reach pods; CHECK names a lost entry or flooding turned back on; a restarted agent puts both
 * back; DEL leaves nothing; the uplink in bridging mode keeps flooding. In throwaway namespaces (I7);
 * every frame is sent and captured inside them.
 *
 * Silence is simulated, never waited for: the test's own bridge gets `ageing_time 0` (it learns
 * nothing more) and `fdb_flush` (what it had learned is gone), as if every pod had been quiet for 300 s.
 *
 * Depends on `PodForwarding.pin` (src/datapath/linux-bridge/pod-forwarding.ts), called from
 * bridge-datapath.ts `#attach` for pod ports only:
 *   [static]   `nl.setBridgeStaticFdb(...)` (ADD) and the re-attach's `setBridgeStaticFdb`;
 *   [no-flood] `nl.setBridgePortUnicastFlood(port.hostIfindex, false)`;
 *   [check]    `PodForwarding.check`, from `BridgeDatapath.checkPort`;
 *   [sticky]   NTF_STICKY in `setStaticFdb` (src/kernel/netlink/bridge-port.ts; lb-pod-fdb-sticky).
 * Each test says which; each fails with its line taken out (scripts/mutate.mjs: lb-pod-static-fdb,
 * lb-pod-static-fdb-reattach, lb-pod-no-unicast-flood, lb-pod-fdb-check), the behavioural test on its
 * own assertion: without [static] on "A reaches B", without [no-flood] on "C received no unknown
 * unicast", and without both (the bridge as it was) on "C received none of the unicast for B". The ARP/ND
 * test fails when the port's broadcast (ARP) or multicast (ND) flooding is turned off instead (checked by
 * hand): it shows that `flood off` is neither.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ipJson, must, run } from '../../bed/exec.js';
import { NamespaceSet, netnsPath } from '../../bed/namespaces.js';
import { resultIps, TestNode } from '../../bed/node.js';
import { type Capture, capture } from '../../bed/tcpdump.js';
import { PodwireError } from '../../src/base/errors.js';
import { BridgeDatapath } from '../../src/datapath/linux-bridge/bridge-datapath.js';
import { Rtnetlink } from '../../src/kernel/netlink/rtnetlink.js';
import { inNetns, NetnsHandle } from '../../src/kernel/netns.js';
import { nftIn } from '../../src/kernel/nft.js';
import { type SysctlWriter, writeSysctl } from '../../src/kernel/sysctl.js';
import { hostVethOf, podMacOf } from './ovs/ovs-node.js';
import { ScapySender, scapyAvailable } from './ovs/scapy-sender.js';

/** A MAC no pod, gateway or node has: unicast to it is unknown unicast. */
const UNKNOWN_MAC = '02:00:5e:10:00:99';

interface FdbRow {
  mac: string;
  ifname?: string;
  flags?: string[];
  master?: string;
  state?: string;
  vlan?: number;
}

/** `bridge -j fdb show` in `ns` (iproute2's reading of the kernel, not podwire's codec). */
async function fdbRows(ns: string): Promise<FdbRow[]> {
  const out = await must('ip', ['netns', 'exec', ns, 'bridge', '-j', 'fdb', 'show']);
  return JSON.parse(out === '' ? '[]' : out) as FdbRow[];
}

/** `ip -d -j link show DEV`'s bridge-port flags. */
async function portFlags(ns: string, dev: string): Promise<Record<string, unknown>> {
  const [l] = await ipJson<Array<{ linkinfo?: { info_slave_data?: Record<string, unknown> } }>>(ns, [
    '-d',
    'link',
    'show',
    dev,
  ]);
  return l?.linkinfo?.info_slave_data ?? {};
}

/** The destination MACs of the frames a `tcpdump -e` capture printed ("SRC > DST, ethertype ..."). */
function destinations(lines: string[]): string[] {
  return lines.map((l) => /> ([0-9a-f:]{17}),/.exec(l)?.[1] ?? '?');
}

async function ping(ns: string, ip: string, count = 1): Promise<number> {
  const args = ['netns', 'exec', ns, 'ping', '-n', '-c', `${count}`, '-W', '2', ip];
  if (ip.includes(':')) args.splice(4, 0, '-6');
  return (await run('ip', args)).code;
}

describe('static forwarding entries and no unknown-unicast flooding on pod ports (agent)', () => {
  const node = new TestNode({ podCIDRs: ['10.244.36.0/24', 'fd00:10:244:36::/64'] });
  const BRIDGE = 'podwire0';
  interface Pod {
    id: string;
    ns: string;
    veth: string;
    mac: string;
    v4: string;
    v6: string;
    add: Awaited<ReturnType<TestNode['cni']>>;
  }
  const pods: Record<'a' | 'b' | 'c', Pod> = {} as Record<'a' | 'b' | 'c', Pod>;

  before(async () => {
    await node.setup();
    for (const id of ['a', 'b', 'c'] as const) {
      const ns = await node.addPod(id);
      const add = await node.cni({ command: 'ADD', containerId: `fdb-${id}`, netns: ns });
      assert.equal(add.code, 0, add.stdout);
      const [v4, v6] = resultIps(add) as [string, string];
      pods[id] = {
        id: `fdb-${id}`,
        ns,
        veth: hostVethOf(add),
        mac: podMacOf(add).toLowerCase(),
        v4,
        v6,
        add,
      };
    }
  });
  after(() => node.cleanup());

  const check = (p: Pod) =>
    node.cni({ command: 'CHECK', containerId: p.id, netns: p.ns, conf: { prevResult: p.add.json } });

  // [static] and [no-flood].
  test("after ADD, `bridge fdb` lists each pod's MAC static on its host veth, and the port floods no unknown unicast", async () => {
    const rows = await fdbRows(node.nodeNs);
    for (const p of Object.values(pods)) {
      const mine = rows.filter((r) => r.mac === p.mac);
      assert.deepEqual(
        mine.map((r) => [r.ifname, r.master, r.state, r.flags?.includes('sticky')]),
        [[p.veth, BRIDGE, 'static', true]],
        `fdb for ${p.mac}: ${JSON.stringify(mine)}`,
      );
      const flags = await portFlags(node.nodeNs, p.veth);
      assert.equal(flags.flood, false, `${p.veth}: unknown unicast not flooded to it`);
      assert.equal(flags.bcast_flood, true, `${p.veth}: broadcast still reaches it`);
      assert.equal(flags.mcast_flood, true, `${p.veth}: multicast still reaches it`);
      assert.equal(flags.hairpin, true, `${p.veth}: still in hairpin mode (decision 19)`);
      assert.equal((await check(p)).code, 0, `CHECK ${p.id}`);
    }
  });

  test("with every dynamic entry gone (simulated ageing), unicast to B still reaches B, and C receives neither B's frames nor unknown unicast", async () => {
    const { a, b, c } = pods;
    await must('ip', ['-n', node.nodeNs, 'link', 'set', BRIDGE, 'type', 'bridge', 'ageing_time', '0']);
    await must('ip', ['-n', node.nodeNs, 'link', 'set', BRIDGE, 'type', 'bridge', 'fdb_flush']);
    const left = (await fdbRows(node.nodeNs)).filter(
      (r) => r.master === BRIDGE && r.state !== 'static' && r.state !== 'permanent',
    );
    assert.deepEqual(
      left,
      [],
      'no dynamic entry left: the bridge knows the pods only by their static entries',
    );
    // A sends by permanent neighbour entries: to B's MAC, to C's, and to a MAC nobody has (a free
    // address of the pod CIDR), without ARP.
    const free4 = '10.244.36.250';
    const neigh = [
      [b.v4, b.mac],
      [c.v4, c.mac],
      [free4, UNKNOWN_MAC],
    ] as const;
    for (const [ip, mac] of neigh)
      await must('ip', [
        '-n',
        a.ns,
        'neigh',
        'replace',
        ip,
        'lladdr',
        mac,
        'dev',
        'eth0',
        'nud',
        'permanent',
      ]);
    const captures: Capture[] = [];
    try {
      const atB = await capture(b.ns, 'eth0', `ether dst ${b.mac} and icmp`);
      captures.push(atB);
      const atC = await capture(
        c.ns,
        'eth0',
        `ether dst ${b.mac} or ether dst ${UNKNOWN_MAC} or ether dst ${c.mac}`,
      );
      captures.push(atC);
      // [static]: with flooding off, only B's static entry takes the echo request to B.
      assert.equal(await ping(a.ns, b.v4), 0, 'A reaches B (by its static entry)');
      assert.notEqual(await ping(a.ns, free4, 2), 0, 'nobody answers for the unknown MAC');
      // The capture in C is live: a frame for C arrives (C's static entry).
      assert.equal(await ping(a.ns, c.v4), 0, 'A reaches C');
      captures.length = 0;
      const seenB = destinations(await atB.stop());
      const seenC = destinations(await atC.stop());
      assert.ok(seenB.filter((d) => d === b.mac).length >= 1, `B received its echo request: ${seenB}`);
      assert.ok(seenC.includes(c.mac), `the capture in C saw C's own frames: ${seenC}`);
      // [static] (else B's frames would be unknown unicast, flooded while flooding is on).
      assert.deepEqual(
        seenC.filter((d) => d === b.mac),
        [],
        'C received none of the unicast for B',
      );
      // [no-flood]: unknown unicast is not flooded to pod ports.
      assert.deepEqual(
        seenC.filter((d) => d === UNKNOWN_MAC),
        [],
        'C received no unknown unicast',
      );
    } finally {
      for (const cap of captures) await cap.stop();
      for (const [ip] of neigh) await run('ip', ['-n', a.ns, 'neigh', 'del', ip, 'dev', 'eth0']);
    }
  });

  // Broadcast and multicast are not `flood`: with the bridge still learning nothing (ageing_time 0 from
  // the test above), ARP requests (broadcast) and neighbour solicitations (solicited-node multicast)
  // from clean caches reach B, and the unicast answers come back by the static entries.
  test('ARP and IPv6 neighbour discovery still reach pods: A pings B from empty neighbour caches', async () => {
    const { a, b } = pods;
    for (const p of [a, b]) {
      await must('ip', ['-n', p.ns, '-4', 'neigh', 'flush', 'all']);
      await must('ip', ['-n', p.ns, '-6', 'neigh', 'flush', 'all']);
    }
    const entry = async (ip: string) =>
      (
        await ipJson<Array<{ lladdr?: string; state?: string[] }>>(a.ns, [
          'neigh',
          'show',
          'to',
          ip,
          'dev',
          'eth0',
        ])
      )[0];
    assert.equal((await entry(b.v4))?.lladdr, undefined, 'A has no entry for B (IPv4) before');
    assert.equal((await entry(b.v6))?.lladdr, undefined, 'A has no entry for B (IPv6) before');
    assert.equal(await ping(a.ns, b.v4), 0, 'A pings B over IPv4 (ARP)');
    assert.equal(await ping(a.ns, b.v6), 0, 'A pings B over IPv6 (ND)');
    assert.equal((await entry(b.v4))?.lladdr?.toLowerCase(), b.mac, "A resolved B's IPv4 address by ARP");
    assert.equal((await entry(b.v6))?.lladdr?.toLowerCase(), b.mac, "A resolved B's IPv6 address by ND");
  });

  // [check]; the restart: bridge-datapath.ts attachPort with an empty MAC (reconcile) -> PodForwarding.pin.
  test('CHECK fails with 104 naming a removed static entry, and flooding turned back on; a restarted agent puts both back', async () => {
    const { b } = pods;
    assert.equal((await check(b)).code, 0);
    await must('ip', ['netns', 'exec', node.nodeNs, 'bridge', 'fdb', 'del', b.mac, 'dev', b.veth, 'master']);
    const lost = await check(b);
    assert.equal(lost.code, 1, lost.stdout);
    assert.equal((lost.json as { code: number }).code, 104, lost.stdout);
    assert.match(
      (lost.json as { msg: string }).msg,
      new RegExp(`${b.veth} lacks its sticky static forwarding entry ${b.mac}`),
    );

    await must('ip', [
      'netns',
      'exec',
      node.nodeNs,
      'bridge',
      'fdb',
      'replace',
      b.mac,
      'dev',
      b.veth,
      'master',
      'static',
    ]);
    await must('ip', ['netns', 'exec', node.nodeNs, 'bridge', 'link', 'set', 'dev', b.veth, 'flood', 'on']);
    const flooding = await check(b);
    assert.equal((flooding.json as { code: number }).code, 104, flooding.stdout);
    assert.match((flooding.json as { msg: string }).msg, new RegExp(`${b.veth} floods unknown unicast`));

    // Both lost while the agent is away: reconcile re-attaches the port (no MAC given) and pins it again.
    await must('ip', ['netns', 'exec', node.nodeNs, 'bridge', 'fdb', 'del', b.mac, 'dev', b.veth, 'master']);
    await node.stopAgent('SIGKILL');
    await node.startAgent();
    assert.equal((await check(b)).code, 0, 'CHECK after the restart');
    const mine = (await fdbRows(node.nodeNs)).filter((r) => r.mac === b.mac);
    assert.deepEqual(
      mine.map((r) => [r.ifname, r.state]),
      [[b.veth, 'static']],
    );
    assert.equal((await portFlags(node.nodeNs, b.veth)).flood, false);
  });

  test('DEL leaves no forwarding entry of the pods behind', async () => {
    for (const p of Object.values(pods))
      assert.equal((await node.cni({ command: 'DEL', containerId: p.id, netns: p.ns })).code, 0);
    const rows = await fdbRows(node.nodeNs);
    const macs = new Set(Object.values(pods).map((p) => p.mac));
    const veths = new Set(Object.values(pods).map((p) => p.veth));
    assert.deepEqual(
      rows.filter((r) => macs.has(r.mac) || veths.has(r.ifname ?? '')),
      [],
    );
  });
});

describe('re-attach without a MAC, and the uplink (datapath, guards off)', () => {
  const spaces = new NamespaceSet();
  let nodeNs = '';
  let home: NetnsHandle;
  let node: NetnsHandle;
  let nl: Rtnetlink;
  const made: BridgeDatapath[] = [];

  const datapath = async () => {
    const sysctl: SysctlWriter = (key, value) => inNetns(node, home, () => writeSysctl(key, value));
    const dp = new BridgeDatapath({
      nl,
      sysctl,
      nft: nftIn(nodeNs),
      bridge: 'pwtfdb0',
      mtu: 1500,
      podGuards: false,
      warn: () => undefined,
      gateways: [{ family: 4, address: '10.250.0.1', prefixLength: 24 }],
    });
    made.push(dp);
    await dp.start();
    return dp;
  };

  before(async () => {
    nodeNs = await spaces.add('fdb');
    home = NetnsHandle.current();
    node = NetnsHandle.open(netnsPath(nodeNs));
    nl = inNetns(node, home, () => Rtnetlink.open());
  });
  after(async () => {
    for (const dp of made) await dp.stop();
    nl?.close();
    node?.close();
    home?.close();
    await spaces.cleanup();
  });

  const staticOn = async (dev: string) =>
    (await fdbRows(nodeNs)).filter((r) => r.ifname === dev && r.state === 'static').map((r) => r.mac);

  /** `bridge ARGS...` in the node namespace (iproute2's side). */
  const bridgeCmd = (...args: string[]) => must('ip', ['netns', 'exec', nodeNs, 'bridge', ...args]);

  /** A veth NAME in the node namespace, its peer NAMEp up, as the port of a pod with `mac` and `ip`. */
  const vethPort = async (name: string, containerId: string, mac: string, ip: string) => {
    await must('ip', ['-n', nodeNs, 'link', 'add', name, 'type', 'veth', 'peer', 'name', `${name}p`]);
    await must('ip', ['-n', nodeNs, 'link', 'set', `${name}p`, 'up']);
    const link = nl.linkByName(name);
    assert.ok(link);
    return {
      hostIfname: name,
      hostIfindex: link.index,
      containerId,
      ifname: 'eth0',
      podMac: mac,
      podIps: [ip],
    };
  };

  // PodForwarding.pin, re-attach branch: the port's own static entry first, else the MAC of the addresses.
  test('a restarted datapath re-attaching without a MAC keeps the static entry the port has, or derives it from the addresses', async () => {
    // A MAC that is not the one of the addresses (0a:58:0a:fa:00:02), so the two cases differ.
    const given = '0a:58:0a:fa:00:09';
    const port = await vethPort('pwtfdb1', 'c1', given, '10.250.0.2');
    await (await datapath()).attachPort(port);
    assert.deepEqual(await staticOn('pwtfdb1'), [given]);

    const restarted = await datapath();
    await restarted.checkPort('pwtfdb1'); // before reconcile re-attaches: held to the port's static entry
    await bridgeCmd('link', 'set', 'dev', 'pwtfdb1', 'flood', 'on');
    await restarted.attachPort({ ...port, podMac: '' });
    assert.deepEqual(await staticOn('pwtfdb1'), [given], 'the entry the port had is kept');
    assert.equal((await portFlags(nodeNs, 'pwtfdb1')).flood, false, 'flooding off again');
    await restarted.checkPort('pwtfdb1');

    await bridgeCmd('fdb', 'del', given, 'dev', 'pwtfdb1', 'master');
    await assert.rejects(
      restarted.checkPort('pwtfdb1'),
      (err) =>
        err instanceof PodwireError &&
        err.code === 'ERR_CHECK_FAILED' &&
        /static forwarding entry/.test(err.message),
    );
    await restarted.attachPort({ ...port, podMac: '' });
    assert.deepEqual(
      await staticOn('pwtfdb1'),
      ['0a:58:0a:fa:00:02'],
      'none there: the MAC of the addresses',
    );
    await restarted.checkPort('pwtfdb1');

    // Restarted again, and the entry lost before any re-attach: CHECK says so all the same.
    const again = await datapath();
    await bridgeCmd('fdb', 'del', '0a:58:0a:fa:00:02', 'dev', 'pwtfdb1', 'master');
    await assert.rejects(
      again.checkPort('pwtfdb1'),
      (err) =>
        err instanceof PodwireError && /pwtfdb1 has no sticky static forwarding entry/.test(err.message),
    );

    await again.isolatePort('pwtfdb1');
    nl.deleteLinkByName('pwtfdb1');
    assert.deepEqual(
      (await fdbRows(nodeNs)).filter((r) => r.mac.startsWith('0a:58:0a:fa:00:')),
      [],
      'nothing left once the veth is gone',
    );
  });

  test('the uplink attached in bridging mode keeps flooding and gets no static entry', async () => {
    const dp = made.at(-1);
    assert.ok(dp);
    await must('ip', ['-n', nodeNs, 'link', 'add', 'pwtfdbup', 'type', 'veth', 'peer', 'name', 'pwtfdbupp']);
    await must('ip', ['-n', nodeNs, 'link', 'set', 'pwtfdbupp', 'up']);
    const link = nl.linkByName('pwtfdbup');
    assert.ok(link?.mac);
    await dp.attachUplink({ ifname: 'pwtfdbup', index: link.index, mac: link.mac, ips: [] });
    try {
      assert.equal((await portFlags(nodeNs, 'pwtfdbup')).flood, true);
      assert.deepEqual(await staticOn('pwtfdbup'), []);
    } finally {
      await dp.detachUplink({ ifname: 'pwtfdbup', index: link.index, targetMac: '02:00:00:00:00:01' });
    }
  });

  // [sticky]: NTF_STICKY in `setStaticFdb` (src/kernel/netlink/bridge-port.ts). A static entry alone is
  // moved by learning to the port a frame with its MAC as source came in on: here the uplink, from a
  // host of the underlay in bridging mode, which then receives the pod's traffic. Also: CHECK names an
  // entry that is static but not sticky, and a re-attach makes it sticky.
  test("a frame from the uplink with a pod's MAC as source does not move the pod's entry; CHECK wants it sticky", {
    skip: !scapyAvailable() && 'python3-scapy is not installed',
  }, async () => {
    const dp = made.at(-1);
    assert.ok(dp);
    const mac = '0a:58:0a:fa:00:0b';
    const port = await vethPort('pwtfdb2', 'c2', mac, '10.250.0.11');
    await must('ip', ['-n', nodeNs, 'link', 'add', 'pwtfdbu2', 'type', 'veth', 'peer', 'name', 'pwtfdbu2p']);
    await must('ip', ['-n', nodeNs, 'link', 'set', 'pwtfdbu2p', 'up']);
    const up = nl.linkByName('pwtfdbu2');
    assert.ok(up?.mac);
    await dp.attachPort(port);
    await dp.attachUplink({ ifname: 'pwtfdbu2', index: up.index, mac: up.mac, ips: [] });
    const scapy = await ScapySender.start(nodeNs);
    try {
      // The underlay's side of the uplink sends as the pod (broadcast, so the bridge takes it in).
      await scapy.send(
        `Ether(src='${mac}', dst='ff:ff:ff:ff:ff:ff')/IP(src='10.250.0.99', dst='10.250.0.255')/UDP(dport=9)`,
        3,
        'pwtfdbu2p',
      );
      const rows = (await fdbRows(nodeNs)).filter((r) => r.mac === mac);
      assert.deepEqual(
        rows.map((r) => r.ifname),
        ['pwtfdb2'],
        `the pod's entry stays on its port: ${JSON.stringify(rows)}`,
      );
      await dp.checkPort('pwtfdb2');
      await bridgeCmd('fdb', 'replace', mac, 'dev', 'pwtfdb2', 'master', 'static');
      await assert.rejects(
        dp.checkPort('pwtfdb2'),
        (err) =>
          err instanceof PodwireError &&
          /lacks its sticky static forwarding entry .*\(the bridge has static vlan 0\)/.test(err.message),
      );
      await dp.attachPort({ ...port, podMac: '' });
      assert.ok(
        (await fdbRows(nodeNs)).some((r) => r.mac === mac && r.flags?.includes('sticky')),
        're-attach made it sticky',
      );
      await dp.checkPort('pwtfdb2');
    } finally {
      await scapy.close();
      await dp.detachUplink({ ifname: 'pwtfdbu2', index: up.index, targetMac: '02:00:00:00:00:02' });
      await dp.isolatePort('pwtfdb2').catch(() => undefined);
      nl.deleteLinkByName('pwtfdb2');
      nl.deleteLinkByName('pwtfdbu2');
    }
  });
});
