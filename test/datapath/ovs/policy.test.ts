/**
 * NetworkPolicy on the OVS datapath (policy-ovs-backend.ts, decision 46), on the bridge's real
 * datapath with pods in namespaces: isolation, allowed peers and ports (TCP and UDP, IPv4 and IPv6),
 * port ranges, except holes, replies of allowed connections, egress, the node's own traffic, a
 * Service-like connection DNATed by the node and answered through the gateway, atomic re-applies,
 * counters, the datapath's flow cache flushed after each change (as the agent builds the backend),
 * and remove() giving back the pipeline's flow table exactly. `PodPolicy` values are built by hand:
 * the compiler is tested on its own.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { must } from '../../../bed/exec.js';
import { resultIps, TestNode } from '../../../bed/node.js';
import { OVS_DATAPATH } from '../../../bed/ovs.js';
import { addressBits, formatIp, parsePrefixOrThrow } from '../../../src/base/ip.js';
import { FlowTable } from '../../../src/datapath/ovs/openflow/flow-table.js';
import { defaultOpenflowTarget } from '../../../src/datapath/ovs/ovs-datapath.js';
import { POLICY_COOKIE, POLICY_COOKIE_MASK, POLICY_TABLE } from '../../../src/datapath/ovs/policy-flows.js';
import { OvsPolicyBackend } from '../../../src/datapath/ovs/policy-ovs-backend.js';
import { unixctl } from '../../../src/datapath/ovs/unixctl.js';
import type { AllowEntry, DirectionPolicy, PodPolicy, PortRange } from '../../../src/policy/model.js';
import { flowTable, ovsOf } from './ovs-node.js';
import { ProbeServer, probe, reaches } from './policy-probe.js';
import { ping } from './traffic.js';

const V4_CIDR = '10.244.47.0/24';
const V6_CIDR = 'fd00:10:244:47::/64';
const GW4 = '10.244.47.1';
const GW6 = 'fd00:10:244:47::1';
const PORTS = [5353, 8080, 8081, 8999, 9000, 9005, 9010, 9011];
const SERVICE_VIP = '10.96.47.10';

interface Pod {
  id: string;
  ns: string;
  v4: string;
  v6: string;
}

/** `cidr` without `hole` (a CIDR inside it): the sibling blocks on the way down, as the compiler gives except. */
function without(cidr: string, hole: string): string[] {
  const outer = parsePrefixOrThrow(cidr);
  const inner = parsePrefixOrThrow(hole);
  const bits = BigInt(addressBits(outer.family));
  const out: string[] = [];
  for (let len = outer.length + 1; len <= inner.length; len++) {
    const bit = 1n << (bits - BigInt(len));
    const prefix = inner.network & ~((bit << 1n) - 1n);
    const sibling = prefix | ((inner.network & bit) === 0n ? bit : 0n);
    out.push(`${formatIp(outer.family, sibling)}/${len}`);
  }
  return out;
}

const tcp = (first: number, last = first): PortRange => ({ protocol: 'TCP', first, last });
const udp = (first: number, last = first): PortRange => ({ protocol: 'UDP', first, last });

function dir(rules: Array<{ id: string; entries: AllowEntry[] }>): DirectionPolicy {
  return { policies: ['default/test'], rules };
}

function policy(pod: Pod, ingress: DirectionPolicy | null, egress: DirectionPolicy | null = null): PodPolicy {
  return { namespace: 'default', name: pod.id, ips: [pod.v4, pod.v6], ingress, egress };
}

describe(`NetworkPolicy on OVS (${OVS_DATAPATH})`, () => {
  const node = new TestNode({ datapath: 'ovs', podCIDRs: [V4_CIDR, V6_CIDR] });
  let flows: FlowTable;
  let backend: OvsPolicyBackend;
  let makeBackend: (recheckMs?: number) => OvsPolicyBackend;
  let a: Pod;
  let b: Pod;
  let c: Pod;
  const servers: ProbeServer[] = [];
  let pristine: string[];
  /** The backend's cache flushes so far, and whether the next one fails (the control socket away). */
  const flush = { count: 0, fail: false };

  async function addPod(id: string): Promise<Pod> {
    const ns = await node.addPod(id);
    const add = await node.cni({ command: 'ADD', containerId: id, netns: ns });
    assert.equal(add.code, 0, add.stdout);
    const [v4, v6] = resultIps(add) as [string, string];
    return { id, ns, v4, v6 };
  }

  before(async () => {
    await node.setup();
    a = await addPod('a');
    b = await addPod('b');
    c = await addPod('c');
    for (const p of [a, b, c]) servers.push(await ProbeServer.start(p.ns, PORTS));
    pristine = await flowTable(node);
    const ovs = ovsOf(node);
    const ofport = Number((await ovs.vsctl('get', 'Interface', 'podwire-gw0', 'ofport')).trim());
    flows = new FlowTable(defaultOpenflowTarget(ovs.ovsdb, node.options.bridge));
    await flows.waitUp(5000);
    makeBackend = (recheckMs) =>
      new OvsPolicyBackend(
        flows,
        { gatewayOfport: ofport, nodeIps: [GW4, GW6] },
        {
          flushCache: async () => {
            flush.count++;
            if (flush.fail) throw new Error('control socket away');
            await unixctl(join(ovs.dir, 'ovs-vswitchd.ctl'), 'revalidator/purge');
          },
          ...(recheckMs === undefined ? {} : { recheckMs }),
        },
      );
    backend = makeBackend();
    await backend.start();
    // IPv6 neighbours settle (DAD) before the first probe.
    for (const p of [b, c]) assert.ok(await ping(a.ns, p.v6, 3), `a reaches ${p.id} over IPv6`);
  });
  after(async () => {
    await backend?.remove().catch(() => undefined);
    await flows?.close();
    for (const s of servers) await s.stop();
    await node.cleanup();
  });

  /** Every (family, protocol) pair of one peer and port. */
  async function matrix(from: Pod, to: Pod, port: number): Promise<string[]> {
    const out: string[] = [];
    for (const ip of [to.v4, to.v6]) {
      for (const proto of ['tcp', 'udp'] as const) {
        if (await reaches(from.ns, proto, ip, port)) out.push(`${proto}${ip.includes(':') ? '6' : '4'}`);
      }
    }
    return out;
  }
  const ALL = ['tcp4', 'udp4', 'tcp6', 'udp6'];

  test('no policy: everything passes; an isolated pod without rules receives nothing', async () => {
    await backend.apply([]);
    assert.deepEqual(await matrix(a, b, 8080), ALL);
    await backend.apply([policy(b, dir([]))]);
    assert.deepEqual(await matrix(a, b, 8080), []);
    assert.deepEqual(await matrix(c, b, 5353), []);
    // b's own egress is not isolated: it still reaches a.
    assert.deepEqual(await matrix(b, a, 8080), ALL);
  });

  test('an allowed peer CIDR and port pass, other ports and peers do not (TCP, UDP, both families)', async () => {
    await backend.apply([
      policy(
        b,
        dir([
          {
            id: 'default/test/ingress/0',
            entries: [{ peers: [`${a.v4}/32`, `${a.v6}/128`], ports: [tcp(8080), udp(5353)] }],
          },
        ]),
      ),
    ]);
    assert.deepEqual(await matrix(a, b, 8080), ['tcp4', 'tcp6']);
    assert.deepEqual(await matrix(a, b, 5353), ['udp4', 'udp6']);
    assert.deepEqual(await matrix(a, b, 8081), []);
    assert.deepEqual(await matrix(c, b, 8080), []);
  });

  test('endPort: a range passes at both ends and inside, not one outside', async () => {
    await backend.apply([
      policy(
        b,
        dir([
          {
            id: 'default/test/ingress/0',
            entries: [{ peers: 'any', ports: [tcp(9000, 9010), udp(9000, 9010)] }],
          },
        ]),
      ),
    ]);
    for (const port of [9000, 9005, 9010]) assert.deepEqual(await matrix(a, b, port), ALL, `port ${port}`);
    for (const port of [8999, 9011]) assert.deepEqual(await matrix(a, b, port), [], `port ${port}`);
  });

  test("except: the pod subnet but c's addresses lets a in and keeps c out", async () => {
    const peers = [...without(V4_CIDR, `${c.v4}/32`), ...without(V6_CIDR, `${c.v6}/128`)];
    await backend.apply([
      policy(b, dir([{ id: 'default/test/ingress/0', entries: [{ peers, ports: 'any' }] }])),
    ]);
    assert.deepEqual(await matrix(a, b, 8081), ALL);
    assert.deepEqual(await matrix(c, b, 8081), []);
  });

  test('replies of an allowed connection pass while the reverse direction is isolated', async () => {
    await backend.apply([
      policy(a, dir([])),
      policy(b, dir([{ id: 'default/test/ingress/0', entries: [{ peers: 'any', ports: 'any' }] }])),
    ]);
    assert.deepEqual(await matrix(a, b, 8080), ALL, 'a opens, b answers');
    assert.deepEqual(await matrix(b, a, 8080), [], 'b cannot open to a');
  });

  test('egress: an egress-isolated pod opens only what its rules allow', async () => {
    await backend.apply([
      policy(
        a,
        null,
        dir([
          {
            id: 'default/test/egress/0',
            entries: [{ peers: [`${b.v4}/32`, `${b.v6}/128`], ports: [tcp(8080)] }],
          },
        ]),
      ),
    ]);
    assert.deepEqual(await matrix(a, b, 8080), ['tcp4', 'tcp6']);
    assert.deepEqual(await matrix(a, b, 5353), []);
    assert.deepEqual(await matrix(a, c, 8080), []);
    // Others still reach a, and a answers them (its replies are not new connections).
    assert.deepEqual(await matrix(c, a, 8080), ALL);
    await backend.apply([policy(a, null, dir([]))]);
    assert.deepEqual(await matrix(a, b, 8080), []);
  });

  test('the node itself reaches an isolated pod (gateway port, node address as source)', async () => {
    await backend.apply([policy(b, dir([]))]);
    assert.ok(await ping(node.nodeNs, b.v4), 'node pings b over IPv4');
    assert.ok(await ping(node.nodeNs, b.v6), 'node pings b over IPv6');
    assert.equal(await probe(node.nodeNs, 'tcp', b.v4, 8080), 1);
    assert.equal(await probe(node.nodeNs, 'udp', b.v6, 5353), 1);
    assert.deepEqual(await matrix(a, b, 8080), []);
  });

  test('a Service-like connection (DNAT on the node) is judged on the backend and its replies go back through the gateway', async () => {
    const nft = `table ip pwtest47 { chain pre { type nat hook prerouting priority -100; ip daddr ${SERVICE_VIP} tcp dport 80 dnat to ${b.v4}:8080; ip daddr ${SERVICE_VIP} udp dport 53 dnat to ${b.v4}:5353; }; }`;
    await must('ip', ['netns', 'exec', node.nodeNs, 'sysctl', '-qw', 'net.ipv4.ip_forward=1']);
    await must('ip', ['netns', 'exec', node.nodeNs, 'nft', nft]);
    try {
      await backend.apply([]);
      assert.equal(await probe(a.ns, 'tcp', SERVICE_VIP, 80), 1, 'no policy: through the Service');
      await backend.apply([
        policy(
          b,
          dir([
            {
              id: 'default/test/ingress/0',
              entries: [{ peers: [`${a.v4}/32`], ports: [tcp(8080), udp(5353)] }],
            },
          ]),
        ),
      ]);
      assert.equal(await probe(a.ns, 'tcp', SERVICE_VIP, 80, 3), 3, 'allowed on the backend port');
      assert.equal(await probe(a.ns, 'udp', SERVICE_VIP, 53, 3), 3, 'allowed on the backend port (UDP)');
      assert.equal(await probe(c.ns, 'tcp', SERVICE_VIP, 80), 0, 'c is not an allowed peer of the backend');
    } finally {
      await must('ip', ['netns', 'exec', node.nodeNs, 'nft', 'delete', 'table', 'ip', 'pwtest47']);
    }
  });

  test('an allowed flow keeps passing through 100 re-applies, each a real change (atomic bundles)', async () => {
    const allowA = { id: 'default/test/ingress/0', entries: [{ peers: [`${a.v4}/32`], ports: [udp(5353)] }] };
    const extra = (n: number) => ({
      id: `default/extra/ingress/${n}`,
      entries: [{ peers: [`10.99.${n % 250}.0/24`], ports: [tcp(1000 + n, 1000 + n + (n % 7))] }],
    });
    await backend.apply([policy(b, dir([allowA]))]);
    const sending = probe(a.ns, 'udp', b.v4, 5353, 400);
    const denied = probe(c.ns, 'udp', b.v4, 5353, 20);
    for (let i = 0; i < 100; i++) {
      await backend.apply([
        policy(b, dir(i % 2 === 0 ? [extra(i), allowA] : [allowA, extra(i)])),
        policy(c, dir([extra(i + 1)])),
      ]);
    }
    const [got, leaked] = await Promise.all([sending, denied]);
    assert.equal(got, 400, 'every new datagram of a was answered');
    assert.equal(leaked, 0, 'no datagram of c was');
  });

  test('counters: the allowing rule counts the connections it let in, deny counts per pod and direction', async () => {
    await backend.apply([
      policy(
        b,
        dir([{ id: 'default/test/ingress/0', entries: [{ peers: [`${a.v4}/32`], ports: [tcp(8080)] }] }]),
      ),
    ]);
    assert.equal(await probe(a.ns, 'tcp', b.v4, 8080, 5), 5);
    assert.equal(await probe(c.ns, 'udp', b.v4, 5353, 3), 0);
    const read = async () => {
      const all = await backend.counters();
      const rule = all.find((x) => x.rule === 'default/test/ingress/0' && x.pod === 'default/b');
      const deny = all.find((x) => x.rule === 'default/b/ingress/deny' && x.pod === 'default/b');
      return { rule: rule?.packets ?? 0n, deny: deny?.packets ?? 0n, bytes: rule?.bytes ?? 0n };
    };
    const deadline = Date.now() + 3000;
    let seen = await read();
    // The userspace datapath credits flows on revalidation (about every 500 ms).
    while ((seen.rule < 5n || seen.deny < 3n) && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 100));
      seen = await read();
    }
    assert.ok(seen.rule >= 5n, `rule counted ${seen.rule} connections, want >= 5`);
    assert.ok(seen.bytes > 0n);
    assert.ok(seen.deny >= 3n, `deny counted ${seen.deny}, want >= 3`);
  });

  test("the datapath's cache is flushed after an apply that changed flows; a failed flush fails the apply and is owed", async () => {
    const p1 = [
      policy(
        b,
        dir([{ id: 'default/test/ingress/0', entries: [{ peers: [`${a.v4}/32`], ports: [udp(5353)] }] }]),
      ),
    ];
    const p2 = [
      policy(
        b,
        dir([{ id: 'default/test/ingress/0', entries: [{ peers: [`${c.v4}/32`], ports: [udp(5353)] }] }]),
      ),
    ];
    await backend.apply(p1);
    let before = flush.count;
    await backend.apply(p1);
    assert.equal(flush.count, before, 'nothing changed: no flush');
    flush.fail = true;
    await assert.rejects(backend.apply(p2), (e: unknown) => {
      assert.match(
        (e as Error).message,
        /policy flows are installed, but the datapath's cached flows were not flushed: control socket away/,
      );
      return true;
    });
    flush.fail = false;
    // The tables hold p2; the flush is owed, also by an apply that changes nothing.
    before = flush.count;
    await backend.apply(p2);
    assert.equal(flush.count, before + 1, 'the owed flush');
    assert.equal(await probe(c.ns, 'udp', b.v4, 5353, 3), 3);
    assert.equal(await probe(a.ns, 'udp', b.v4, 5353, 3), 0);
    await backend.apply(p2);
    assert.equal(flush.count, before + 1, 'and only once');
  });

  test('an apply sends the difference from the last install; flows removed behind its back come back when the switch is read again', async () => {
    const allowA = [
      policy(
        b,
        dir([{ id: 'default/test/ingress/0', entries: [{ peers: [`${a.v4}/32`], ports: [udp(5353)] }] }]),
      ),
    ];
    const alsoC = [...allowA, policy(c, dir([]))];
    /** The rule's counting flows: table 48, matching `conj_id`. */
    const counting = async () =>
      (await flows.dumpMasked(POLICY_COOKIE, POLICY_COOKIE_MASK)).filter(
        (f) => f.table === POLICY_TABLE.INGRESS_RULES && f.priority === 200,
      );
    /** Deleted behind the backend's back. */
    const punch = async () => {
      const found = await counting();
      assert.ok(found.length > 0, 'the rule has counting flows');
      for (const f of found) await flows.deleteCookie(f.cookie);
      assert.equal((await counting()).length, 0);
    };
    // A replay makes the next apply read the switch: the 60 s before the next read start now.
    backend.flowsInForce();
    await backend.apply(alsoC);
    await backend.apply(allowA);
    assert.equal(await probe(a.ns, 'udp', b.v4, 5353, 3), 3, 'a allowed into b');
    await punch();
    // Within the recheck interval an apply trusts its last install: c's change is sent, not the hole.
    await backend.apply(alsoC);
    assert.equal((await counting()).length, 0, 'the switch not read again yet');
    // After a replay of the whole table (flowsInForce), the next apply reads the switch.
    backend.flowsInForce();
    await backend.apply(allowA);
    assert.ok((await counting()).length > 0, 'put right after a replay');
    assert.equal(await probe(a.ns, 'udp', b.v4, 5353, 3), 3, 'a allowed into b again');
    // Once the last read is older than recheckMs (0 here), every apply reads the switch.
    const eager = makeBackend(0);
    await eager.apply(allowA);
    await punch();
    await eager.apply(alsoC);
    assert.ok((await counting()).length > 0, 'put right when the read is due');
    // The suite's backend did not install what is there now: it reads the switch on its next apply.
    backend.flowsInForce();
  });

  test('bad input changes nothing; remove() gives back the pipeline flow table exactly', async () => {
    await backend.apply([policy(b, dir([]))]);
    await assert.rejects(backend.apply([policy(a, null), policy(a, null)]), /given twice/);
    assert.deepEqual(await matrix(a, b, 8080), [], 'the previous state stays in force');
    await backend.remove();
    assert.deepEqual(await flowTable(node), pristine);
    assert.deepEqual(await matrix(a, b, 8080), ALL);
  });
});
