/**
 * The Linux bridge's policy backend applies per pod (decision 53): each apply generates elements only
 * for the pods whose compiled policy changed and sends only their difference. Judged against the
 * kernel: after every apply of a generated sequence, the policy table's sets hold exactly the elements
 * of the whole state (policy-elements.ts, the first pod's where two share an address), and an apply
 * that fails on bad input leaves them as they were. In a throwaway namespace, no pods needed: the
 * sets are judged, not traffic (linux-bridge-policy.test.ts judges traffic).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { NamespaceSet, netnsPath } from '../../bed/namespaces.js';
import { NftPolicyBackend } from '../../src/datapath/linux-bridge/nft-policy-backend.js';
import { policyElements } from '../../src/datapath/linux-bridge/policy-elements.js';
import { ALL_POLICY_SETS, POLICY_TABLE } from '../../src/datapath/linux-bridge/policy-table.js';
import { NfTables } from '../../src/kernel/netlink/nf-tables.js';
import { NFPROTO_INET } from '../../src/kernel/netlink/uapi/nfnetlink.js';
import { inNetns, NetnsHandle } from '../../src/kernel/netns.js';
import { nftIn } from '../../src/kernel/nft.js';
import type { AllowEntry, CompiledRule, DirectionPolicy, PodPolicy } from '../../src/policy/model.js';

const hex = (b: Uint8Array | undefined) => (b ? Buffer.from(b).toString('hex') : '');

/** Every element of the policy table's sets, as `set key-keyEnd`, sorted. */
function kernelElements(nf: NfTables): string[] {
  return ALL_POLICY_SETS.flatMap((set) =>
    nf.listSetElems(NFPROTO_INET, POLICY_TABLE, set).map((e) => `${set} ${hex(e.key)}-${hex(e.keyEnd)}`),
  ).sort();
}

/** What the sets must hold for `pods`: every element, the first one's of a key two pods share. */
function expectedElements(pods: readonly PodPolicy[]): string[] {
  return [...new Set(policyElements(pods).map((e) => `${e.set} ${hex(e.key)}-${hex(e.keyEnd)}`))].sort();
}

// Small worlds, so that pods often share rules, change a little, come and go, and now and then two
// claim one address.
const address = fc.constantFrom(
  '10.70.0.1',
  '10.70.0.2',
  '10.70.0.3',
  '10.70.0.4',
  'fd00:70::1',
  'fd00:70::2',
);
const OWN: Record<string, string> = {
  a: '10.70.0.1',
  b: '10.70.0.2',
  c: '10.70.0.3',
  d: 'fd00:70::1',
  e: 'fd00:70::2',
};
const peers = fc.oneof(
  fc.constant<'any'>('any'),
  fc.subarray(['10.71.0.0/24', '10.70.0.2/32', '10.72.0.0/16', 'fd00:71::/64', 'fd00:70::1/128'], {
    minLength: 1,
  }),
);
const ports = fc.oneof(
  fc.constant<'any'>('any'),
  fc.array(
    fc
      .record({
        protocol: fc.constantFrom('TCP' as const, 'UDP' as const),
        first: fc.integer({ min: 80, max: 90 }),
      })
      .chain((p) => fc.integer({ min: p.first, max: 95 }).map((last) => ({ ...p, last }))),
    { minLength: 1, maxLength: 2 },
  ),
);
const entry: fc.Arbitrary<AllowEntry> = fc.record({ peers, ports });
const rule = (i: number): fc.Arbitrary<CompiledRule> =>
  fc.array(entry, { maxLength: 2 }).map((entries) => ({ id: `ns/p/r/${i}`, entries }));
const direction: fc.Arbitrary<DirectionPolicy | null> = fc.option(
  fc
    .array(fc.nat(3), { maxLength: 3 })
    .chain((ids) => fc.tuple(...ids.map(rule)))
    .map((rules) => ({ policies: ['ns/p'], rules })),
  { nil: null, freq: 4 },
);
const podPolicy = (name: string): fc.Arbitrary<PodPolicy> =>
  fc.record({
    namespace: fc.constant('ns'),
    name: fc.constant(name),
    // Mostly the pod's own address (so that a pod keeps it from state to state while its rules
    // change), now and then any: two pods may claim one.
    ips: fc.oneof(
      { weight: 4, arbitrary: fc.constant(name).map((n): string[] => [OWN[n] as string]) },
      { weight: 1, arbitrary: fc.uniqueArray(address, { minLength: 1, maxLength: 2 }) },
    ),
    ingress: direction,
    egress: direction,
  });
/** A state: some of pods a-e (each a name once), in a generated order. */
const state = fc
  .subarray(['a', 'b', 'c', 'd', 'e'], { minLength: 0 })
  .chain((names) => fc.tuple(...names.map(podPolicy)))
  .map((pods) => [...pods]);

describe('the Linux bridge policy backend, per pod', () => {
  const spaces = new NamespaceSet();
  let home: NetnsHandle | undefined;
  let node: NetnsHandle | undefined;
  let nf: NfTables | undefined;
  let backend: NftPolicyBackend;

  before(async () => {
    const ns = await spaces.add('policy-diff');
    home = NetnsHandle.current();
    node = NetnsHandle.open(netnsPath(ns));
    const n = node;
    const h = home;
    nf = inNetns(n, h, () => NfTables.open());
    backend = new NftPolicyBackend(nftIn(ns), nf);
    await backend.start();
  });
  after(async () => {
    await backend?.remove().catch(() => undefined);
    nf?.close();
    node?.close();
    home?.close();
    await spaces.cleanup();
  });

  test('after every apply of a sequence, the sets hold exactly the whole state; a refused apply changes nothing', async () => {
    const table = nf as NfTables;
    await fc.assert(
      fc.asyncProperty(fc.array(state, { minLength: 1, maxLength: 8 }), async (states) => {
        for (const pods of states) {
          await backend.apply(pods);
          assert.deepEqual(kernelElements(table), expectedElements(pods));
        }
        const last = states[states.length - 1] as PodPolicy[];
        const bad: PodPolicy = {
          namespace: 'ns',
          name: 'bad',
          ips: ['10.70.0.9'],
          ingress: {
            policies: ['ns/p'],
            rules: [
              {
                id: 'ns/p/bad',
                entries: [{ peers: 'any', ports: [{ protocol: 'TCP', first: 90, last: 80 }] }],
              },
            ],
          },
          egress: null,
        };
        await assert.rejects(backend.apply([...last, bad]), /invalid port range/);
        assert.deepEqual(kernelElements(table), expectedElements(last), 'the refused apply changed nothing');
      }),
      { numRuns: 40 },
    );
  });

  test("two pods with one address (a stale Pod object) and different rules: applied, the address the first one's", async () => {
    const table = nf as NfTables;
    const allow = (cidr: string): DirectionPolicy => ({
      policies: ['ns/p'],
      rules: [
        {
          id: 'ns/p/ingress/0',
          entries: [{ peers: [cidr], ports: [{ protocol: 'TCP', first: 80, last: 80 }] }],
        },
      ],
    });
    const first: PodPolicy = {
      namespace: 'ns',
      name: 'new',
      ips: ['10.74.0.5'],
      ingress: allow('10.71.0.0/24'),
      egress: null,
    };
    const stale: PodPolicy = {
      namespace: 'ns',
      name: 'old',
      ips: ['10.74.0.5'],
      ingress: allow('10.71.0.0/16'),
      egress: allow('10.72.0.0/16'),
    };
    await backend.apply([first, stale]);
    const held = kernelElements(table);
    assert.deepEqual(held, expectedElements([first]), "the first pod's elements, nothing of the second");
    await backend.apply([first]);
    assert.deepEqual(kernelElements(table), held, 'the stale object gone: nothing changes');
    await backend.apply([]);
  });

  test("a rule renamed with the same cells: the elements stay, their counters are the new rule's", async () => {
    const rule = (id: string): DirectionPolicy => ({
      policies: [id.split('/').slice(0, 2).join('/')],
      rules: [
        { id, entries: [{ peers: ['10.71.0.0/24'], ports: [{ protocol: 'TCP', first: 80, last: 80 }] }] },
      ],
    });
    const x = (ingress: DirectionPolicy): PodPolicy => ({
      namespace: 'ns',
      name: 'x',
      ips: ['10.75.0.2'],
      ingress,
      egress: null,
    });
    await backend.apply([x(rule('ns/a/ingress/0'))]);
    const before = kernelElements(nf as NfTables);
    await backend.apply([x(rule('ns/b/ingress/0'))]);
    assert.deepEqual(kernelElements(nf as NfTables), before, 'the same elements');
    const rules = (await backend.counters()).map((c) => c.rule).sort();
    assert.deepEqual(rules, ['ns/b/ingress/0', 'ns/x/ingress/deny']);
    await backend.apply([]);
  });

  test("one pod changed among many: the sets change by that pod's elements alone", async () => {
    const table = nf as NfTables;
    const peersOf = (n: number): AllowEntry => ({ peers: [`10.71.${n}.0/24`], ports: 'any' });
    const many: PodPolicy[] = Array.from({ length: 40 }, (_, i) => ({
      namespace: 'ns',
      name: `p${i}`,
      ips: [`10.73.0.${i + 1}`],
      ingress: { policies: ['ns/p'], rules: [{ id: 'ns/p/ingress/0', entries: [peersOf(i % 3)] }] },
      egress: null,
    }));
    await backend.apply(many);
    const changed = many.map((p, i) =>
      i === 7
        ? { ...p, ingress: { policies: ['ns/p'], rules: [{ id: 'ns/p/ingress/0', entries: [peersOf(9)] }] } }
        : p,
    );
    const before = kernelElements(table);
    await backend.apply(changed);
    const afterChange = kernelElements(table);
    assert.deepEqual(afterChange, expectedElements(changed));
    const gone = before.filter((e) => !afterChange.includes(e));
    const added = afterChange.filter((e) => !before.includes(e));
    // p7 is 10.73.0.8 (0a490008): its element of the old peers went, its element of the new came.
    assert.equal(gone.length, 1);
    assert.equal(added.length, 1);
    assert.match(gone[0] as string, /0a490008/);
    assert.match(added[0] as string, /0a490008/);
    await backend.apply([]);
    assert.deepEqual(kernelElements(table), []);
  });
  test('counters asked while an apply is in the kernel wait for it (the batch runs on a worker thread)', async () => {
    const table = nf as NfTables;
    // 400 pods, each allowed from its own 50 peers: 20 000 elements in one batch.
    const pods: PodPolicy[] = Array.from({ length: 400 }, (_, i) => ({
      namespace: 'ns',
      name: `c${i}`,
      ips: [`10.74.${i >> 7}.${(i & 127) + 1}`],
      ingress: {
        policies: ['ns/c'],
        rules: [
          {
            id: 'ns/c/ingress/0',
            entries: [
              { peers: Array.from({ length: 50 }, (_, j) => `10.75.${i % 200}.${j * 4}/30`), ports: 'any' },
            ],
          },
        ],
      },
      egress: null,
    }));
    const applying = backend.apply(pods);
    // Asked in the same turn: without the backend's queue, the counters' dump would meet the batch on
    // the socket ("a batch is in flight") or read its acks.
    const counting = backend.counters();
    await applying;
    const counters = await counting;
    assert.equal(
      counters.filter((c) => c.rule === 'ns/c/ingress/0').length,
      400,
      'every pod has its rule counted',
    );
    assert.deepEqual(kernelElements(table), expectedElements(pods));
    await backend.apply([]);
    assert.deepEqual(kernelElements(table), []);
  });
});
