/**
 * NetworkPolicy on the Linux bridge (issue 28, decision 45): the nftables backend on a real bridge with
 * br_netfilter, in throwaway namespaces. Three pods on one bridge (A, B, C), a node that routes to an
 * outside namespace X (standing for another node or the world), `PodPolicy` values made by hand.
 * Every packet is sent from inside a namespace the test made.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { must } from '../../bed/exec.js';
import { NamespaceSet, netnsPath } from '../../bed/namespaces.js';
import { NftPolicyBackend } from '../../src/datapath/linux-bridge/nft-policy-backend.js';
import { ALL_POLICY_SETS, POLICY_TABLE } from '../../src/datapath/linux-bridge/policy-table.js';
import { NfTables } from '../../src/kernel/netlink/nf-tables.js';
import { NFPROTO_INET } from '../../src/kernel/netlink/uapi/nfnetlink.js';
import { inNetns, NetnsHandle } from '../../src/kernel/netns.js';
import { nftIn } from '../../src/kernel/nft.js';
import type { CompiledRule, DirectionPolicy, PodPolicy } from '../../src/policy/model.js';
import { type Probe, ProbeServers, probeFrom, udpStream } from './policy-probe.js';

const A = { v4: '10.90.0.2', v6: 'fd00:90::2' };
const B = { v4: '10.90.0.3', v6: 'fd00:90::3' };
const C = { v4: '10.90.0.4', v6: 'fd00:90::4' };
const X = { v4: '10.91.0.2', v6: 'fd00:91::2' };
const PORTS = [7000, 7001, 7103, 7106];

const pod = (name: string, ips: { v4: string; v6: string }, p: Partial<PodPolicy> = {}): PodPolicy => ({
  namespace: 'ns',
  name,
  ips: [ips.v4, ips.v6],
  ingress: null,
  egress: null,
  ...p,
});
const dir = (rules: CompiledRule[]): DirectionPolicy => ({ policies: ['ns/p'], rules });

describe('NetworkPolicy on the Linux bridge (nftables)', () => {
  const spaces = new NamespaceSet();
  const servers = new ProbeServers();
  const handles: NetnsHandle[] = [];
  let nf: NfTables | undefined;
  let backend: NftPolicyBackend;
  let node = '';
  const ns: Record<string, string> = {};

  const sh = (netns: string, ...cmd: string[]) => must('ip', ['netns', 'exec', netns, ...cmd]);

  before(async () => {
    node = await spaces.add('pnode');
    for (const name of ['a', 'b', 'c', 'x']) ns[name] = await spaces.add(`p${name}`);
    await sh(node, 'sysctl', '-qw', 'net.ipv4.ip_forward=1', 'net.ipv6.conf.all.forwarding=1');
    await sh(
      node,
      'sysctl',
      '-qw',
      'net.bridge.bridge-nf-call-iptables=1',
      'net.bridge.bridge-nf-call-ip6tables=1',
    );
    await sh(node, 'ip', 'link', 'add', 'br0', 'type', 'bridge');
    await sh(node, 'ip', 'addr', 'add', '10.90.0.1/24', 'dev', 'br0');
    await sh(node, 'ip', 'addr', 'add', 'fd00:90::1/64', 'dev', 'br0', 'nodad');
    await sh(node, 'ip', 'link', 'set', 'br0', 'up');
    for (const [name, ips] of [
      ['a', A],
      ['b', B],
      ['c', C],
    ] as const) {
      const host = `v${name}`;
      await sh(
        node,
        'ip',
        'link',
        'add',
        host,
        'type',
        'veth',
        'peer',
        'name',
        'eth0',
        'netns',
        ns[name] as string,
      );
      await sh(node, 'ip', 'link', 'set', host, 'master', 'br0', 'up');
      const p = ns[name] as string;
      await sh(p, 'ip', 'addr', 'add', `${ips.v4}/24`, 'dev', 'eth0');
      await sh(p, 'ip', 'addr', 'add', `${ips.v6}/64`, 'dev', 'eth0', 'nodad');
      await sh(p, 'ip', 'link', 'set', 'eth0', 'up');
      await sh(p, 'ip', 'link', 'set', 'lo', 'up');
      await sh(p, 'ip', 'route', 'add', 'default', 'via', '10.90.0.1');
      await sh(p, 'ip', '-6', 'route', 'add', 'default', 'via', 'fd00:90::1');
    }
    const x = ns.x as string;
    await sh(node, 'ip', 'link', 'add', 'vx', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', x);
    await sh(node, 'ip', 'addr', 'add', '10.91.0.1/24', 'dev', 'vx');
    await sh(node, 'ip', 'addr', 'add', 'fd00:91::1/64', 'dev', 'vx', 'nodad');
    await sh(node, 'ip', 'link', 'set', 'vx', 'up');
    await sh(x, 'ip', 'addr', 'add', `${X.v4}/24`, 'dev', 'eth0');
    await sh(x, 'ip', 'addr', 'add', `${X.v6}/64`, 'dev', 'eth0', 'nodad');
    await sh(x, 'ip', 'link', 'set', 'eth0', 'up');
    await sh(x, 'ip', 'link', 'set', 'lo', 'up');
    await sh(x, 'ip', 'route', 'add', '10.90.0.0/24', 'via', '10.91.0.1');
    await sh(x, 'ip', '-6', 'route', 'add', 'fd00:90::/64', 'via', 'fd00:91::1');
    await servers.start([ns.a, ns.b, ns.c, ns.x] as string[], PORTS);
    const home = NetnsHandle.current();
    const n = NetnsHandle.open(netnsPath(node));
    handles.push(home, n);
    nf = inNetns(n, home, () => NfTables.open());
    backend = new NftPolicyBackend(nftIn(node), nf);
    await backend.start();
  });

  after(async () => {
    await servers.stop();
    nf?.close();
    for (const h of handles) h.close();
    await spaces.cleanup();
  });

  const from = (name: string, probes: Probe[]) => probeFrom(ns[name] as string, probes);

  test('without policy every pod reaches every other, TCP and UDP, both families', async () => {
    await backend.apply([]);
    const probes: Probe[] = [
      ['tcp', C.v4, 7000],
      ['udp', C.v4, 7000],
      ['tcp', C.v6, 7000],
      ['udp', C.v6, 7000],
      ['tcp', X.v4, 7000],
      ['udp', X.v6, 7000],
    ];
    assert.deepEqual(await from('a', probes), [true, true, true, true, true, true]);
  });

  // Depends on `ip daddr @in_iso4 jump ingress4_deny` and its `drop` (policy-table.ts chainOf).
  test('an ingress-isolated pod with no rule: TCP and UDP, IPv4 and IPv6, dropped and counted', async () => {
    await backend.apply([pod('c', C, { ingress: dir([]) })]);
    const probes: Probe[] = [
      ['tcp', C.v4, 7000],
      ['udp', C.v4, 7000],
      ['tcp', C.v6, 7000],
      ['udp', C.v6, 7000],
    ];
    assert.deepEqual(await from('a', probes), [false, false, false, false]);
    assert.deepEqual(await from('x', probes), [false, false, false, false], 'routed from another node too');
    assert.deepEqual(await from('a', [['tcp', B.v4, 7000]]), [true], 'other pods are not isolated');
    const denied = (await backend.counters()).find((c) => c.rule === 'ns/c/ingress/deny');
    assert.ok(
      denied && denied.packets >= 4n,
      `denied counted: ${JSON.stringify(denied, (_, v) => (typeof v === 'bigint' ? String(v) : v))}`,
    );
  });

  test('an allowed peer CIDR and port passes, TCP and UDP, both families; other peers and ports do not', async () => {
    await backend.apply([
      pod('c', C, {
        ingress: dir([
          {
            id: 'ns/p/ingress/0',
            entries: [
              {
                peers: [`${A.v4}/32`, `${A.v6}/128`, '10.91.0.0/24'],
                ports: [
                  { protocol: 'TCP', first: 7000, last: 7000 },
                  { protocol: 'UDP', first: 7000, last: 7000 },
                ],
              },
            ],
          },
        ]),
      }),
    ]);
    const probes: Probe[] = [
      ['tcp', C.v4, 7000],
      ['udp', C.v4, 7000],
      ['tcp', C.v6, 7000],
      ['udp', C.v6, 7000],
      ['tcp', C.v4, 7001],
      ['udp', C.v6, 7001],
    ];
    assert.deepEqual(await from('a', probes), [true, true, true, true, false, false]);
    assert.deepEqual(await from('b', probes), [false, false, false, false, false, false]);
    assert.deepEqual(
      await from('x', probes),
      [true, true, false, false, false, false],
      'X allowed by IPv4 CIDR only',
    );
    const allowed = (await backend.counters()).find((c) => c.rule === 'ns/p/ingress/0' && c.pod === 'ns/c');
    assert.ok(allowed && allowed.packets >= 6n, 'allowed packets counted for the rule');
  });

  test('a port range (endPort): inside passes, outside does not', async () => {
    await backend.apply([
      pod('c', C, {
        ingress: dir([
          {
            id: 'ns/p/ingress/0',
            entries: [{ peers: 'any', ports: [{ protocol: 'TCP', first: 7100, last: 7105 }] }],
          },
        ]),
      }),
    ]);
    assert.deepEqual(
      await from('a', [
        ['tcp', C.v4, 7103],
        ['tcp', C.v6, 7103],
        ['tcp', C.v4, 7106],
        ['udp', C.v4, 7103],
      ]),
      [true, true, false, false],
    );
  });

  // Depends on disjointSpans merging only touching spans (policy-elements.ts).
  test('an except: the disjoint CIDRs around the hole pass, the hole does not', async () => {
    // ipBlock 10.90.0.0/24 except 10.90.0.2/32 (A), and fd00:90::/64 except fd00:90::2/128, as the
    // compiler gives it: the CIDRs left.
    const v4 = [
      '10.90.0.0/31',
      '10.90.0.3/32',
      '10.90.0.4/30',
      '10.90.0.8/29',
      '10.90.0.16/28',
      '10.90.0.32/27',
    ];
    const v4b = ['10.90.0.64/26', '10.90.0.128/25'];
    const v6 = ['fd00:90::/127', 'fd00:90::3/128', 'fd00:90::4/126', 'fd00:90::8/125', 'fd00:90::10/124'];
    await backend.apply([
      pod('c', C, {
        ingress: dir([
          {
            id: 'ns/p/ingress/0',
            entries: [
              { peers: [...v4, ...v4b, ...v6], ports: [{ protocol: 'TCP', first: 7000, last: 7001 }] },
            ],
          },
          { id: 'ns/p/ingress/1', entries: [{ peers: [...v4, ...v6], ports: 'any' }] },
        ]),
      }),
    ]);
    const probes: Probe[] = [
      ['tcp', C.v4, 7000],
      ['tcp', C.v6, 7000],
      ['udp', C.v4, 7001],
      ['udp', C.v6, 7001],
    ];
    assert.deepEqual(await from('b', probes), [true, true, true, true], 'B, beside the hole');
    assert.deepEqual(await from('a', probes), [false, false, false, false], 'A, the hole');
  });

  // Depends on `ct state established,related accept` (policy-table.ts).
  test('replies of an allowed connection pass while the reverse direction is isolated', async () => {
    await backend.apply([pod('c', C, { ingress: dir([]) }), pod('a', A, { ingress: dir([]) })]);
    assert.deepEqual(
      await from('c', [
        ['tcp', B.v4, 7000],
        ['udp', B.v6, 7000],
        ['tcp', X.v4, 7000],
        ['udp', X.v6, 7000],
        ['tcp', A.v4, 7000],
      ]),
      [true, true, true, true, false],
    );
    assert.deepEqual(await from('b', [['tcp', C.v4, 7000]]), [false]);
  });

  test('egress isolation: a pod reaches only its allowed peer, on the bridge and routed', async () => {
    await backend.apply([
      pod('a', A, {
        egress: dir([
          {
            id: 'ns/p/egress/0',
            entries: [
              {
                peers: [`${B.v4}/32`, `${B.v6}/128`],
                ports: [{ protocol: 'TCP', first: 7000, last: 7000 }],
              },
            ],
          },
        ]),
      }),
    ]);
    assert.deepEqual(
      await from('a', [
        ['tcp', B.v4, 7000],
        ['tcp', B.v6, 7000],
        ['udp', B.v4, 7000],
        ['tcp', C.v4, 7000],
        ['tcp', X.v4, 7000],
        ['udp', X.v6, 7000],
      ]),
      [true, true, false, false, false, false],
    );
    assert.deepEqual(await from('c', [['tcp', A.v4, 7000]]), [true], 'ingress to A is not isolated');
    const c = await backend.counters();
    assert.ok(c.some((r) => r.rule === 'ns/a/egress/deny' && r.packets > 0n));
  });

  test('the node itself reaches an isolated pod', async () => {
    await backend.apply([pod('c', C, { ingress: dir([]), egress: dir([]) })]);
    assert.deepEqual(
      await probeFrom(node, [
        ['tcp', C.v4, 7000],
        ['tcp', C.v6, 7000],
        ['udp', C.v4, 7000],
      ]),
      [true, true, true],
    );
    assert.deepEqual(await from('a', [['tcp', C.v4, 7000]]), [false]);
  });

  test('apply is atomic: an allowed flow keeps passing through 100 re-applies; a removed pod leaves no element', async () => {
    const allowA = (id: string, peers: string[], first: number, last: number): CompiledRule => ({
      id,
      entries: [{ peers, ports: [{ protocol: 'UDP', first, last }] }],
    });
    // Two states that allow A -> C:7000/UDP with different elements, and change B around it.
    const states: PodPolicy[][] = [
      [pod('c', C, { ingress: dir([allowA('ns/p/ingress/0', [`${A.v4}/32`], 7000, 7000)]) })],
      [
        pod('c', C, {
          ingress: dir([
            allowA('ns/q/ingress/0', ['10.90.0.0/30'], 6990, 7010),
            allowA('ns/q/ingress/1', ['10.90.0.2/31', '10.91.0.0/24'], 7000, 7001),
          ]),
        }),
        pod('b', B, { ingress: dir([]), egress: dir([allowA('ns/q/egress/0', ['0.0.0.0/0'], 53, 53)]) }),
      ],
    ];
    await backend.apply(states[0] as PodPolicy[]);
    const count = 1500;
    const stream = udpStream(ns.a as string, C.v4, 7000, count, 'atomic');
    for (let i = 1; i <= 100; i++) {
      await backend.apply(states[i % 2] as PodPolicy[]);
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(await stream, count, 'every datagram of the flow arrived');
    // state[0] after 100: B's elements are gone.
    const bKey = Buffer.from([10, 90, 0, 3]).toString('hex');
    for (const set of ALL_POLICY_SETS) {
      const elems = nf?.listSetElems(NFPROTO_INET, POLICY_TABLE, set) ?? [];
      assert.ok(
        !elems.some((e) => Buffer.from(e.key).toString('hex').startsWith(bKey)),
        `no element of B in ${set}`,
      );
    }
    await backend.apply([]);
    for (const set of ALL_POLICY_SETS)
      assert.deepEqual(nf?.listSetElems(NFPROTO_INET, POLICY_TABLE, set), [], set);
  });

  // Depends on NfnetlinkSocket growing its send buffer to the batch (nfnetlink-socket.ts #fitSendBuffer).
  test("a node's worth of pods in one apply (one batch of several hundred KB), and out again", async () => {
    const many: PodPolicy[] = [];
    for (let i = 0; i < 1000; i++) {
      const ips = { v4: `10.92.${i >> 8}.${i & 0xff}`, v6: `fd00:92::${i.toString(16)}` };
      const rule = (n: number, peers: string[] | 'any'): CompiledRule => ({
        id: `ns/p${i}/ingress/${n}`,
        entries: [
          {
            peers,
            ports: [
              { protocol: 'TCP', first: 8000 + n, last: 8000 + n },
              { protocol: 'UDP', first: 53, last: 53 },
            ],
          },
        ],
      });
      many.push(
        pod(`m${i}`, ips, {
          ingress: dir([rule(0, ['10.0.0.0/8', 'fd00::/8']), rule(1, 'any'), rule(2, ['192.168.0.0/16'])]),
          egress: dir([rule(0, ['10.96.0.0/12', 'fd00:96::/108'])]),
        }),
      );
    }
    await backend.apply(many);
    const sizes = Object.fromEntries(
      ALL_POLICY_SETS.map((set) => [set, nf?.listSetElems(NFPROTO_INET, POLICY_TABLE, set).length]),
    );
    // Per pod, ingress IPv4 TCP, cut into disjoint cells along the peer axis: below 10/8: 8001 (rule 1);
    // 10/8: 8000 (rule 0) and 8001; up to 192.168/16: 8001; 192.168/16: 8001 and 8002 (rule 2); above:
    // 8001 (7 cells); UDP 53: rule 1, then 10/8 for rule 0, then rule 1 to the end (3 cells: rule 2's
    // 192.168/16 is rule 1's already). IPv6 the same without rule 2: 4 + 3.
    assert.deepEqual(sizes, {
      in_ports4: 1000 * 10,
      in_any4: 0,
      in_iso4: 1000,
      in_ports6: 1000 * 7,
      in_any6: 0,
      in_iso6: 1000,
      eg_ports4: 2000,
      eg_any4: 0,
      eg_iso4: 1000,
      eg_ports6: 2000,
      eg_any6: 0,
      eg_iso6: 1000,
    });
    await backend.apply([]);
    for (const set of ALL_POLICY_SETS)
      assert.equal(nf?.listSetElems(NFPROTO_INET, POLICY_TABLE, set).length, 0, set);
  });

  // Depends on NftPolicyBackend.apply reading the kernel's sets again after a failed batch.
  test('an element changed behind its back: the next apply reads the kernel again and converges', async () => {
    await backend.apply([pod('c', C, { ingress: dir([]) }), pod('a', A, { ingress: dir([]) })]);
    await sh(node, 'nft', 'delete', 'element', 'inet', POLICY_TABLE, 'in_iso4', `{ ${C.v4} }`);
    await sh(node, 'nft', 'add', 'element', 'inet', POLICY_TABLE, 'in_iso4', `{ ${B.v4} }`);
    // Removing C's element alone would fail (ENOENT) and abort the whole batch.
    await backend.apply([pod('a', A, { ingress: dir([]) })]);
    const iso4 = (nf?.listSetElems(NFPROTO_INET, POLICY_TABLE, 'in_iso4') ?? []).map((e) =>
      [...e.key].join('.'),
    );
    assert.deepEqual(iso4, [A.v4], 'exactly what was applied');
    assert.deepEqual(
      await from('c', [
        ['tcp', B.v4, 7000],
        ['tcp', A.v4, 7000],
      ]),
      [true, false],
    );
    await backend.apply([]);
  });

  test('remove() leaves no table; start() again installs it', async () => {
    await backend.apply([pod('c', C, { ingress: dir([]) })]);
    await backend.remove();
    const tables = await sh(node, 'nft', 'list', 'tables');
    assert.doesNotMatch(tables, new RegExp(POLICY_TABLE));
    assert.deepEqual(await from('a', [['tcp', C.v4, 7000]]), [true]);
    await backend.start();
    await backend.apply([]);
    await backend.remove();
    assert.doesNotMatch(await sh(node, 'nft', 'list', 'tables'), new RegExp(POLICY_TABLE));
  });
});
