import assert from 'node:assert/strict';
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { stringify } from 'yaml';
import { FileStore } from '../../src/cluster/file-store.js';
import type { NodeRecord } from '../../src/cluster/store.js';
import { clusterStoreCompliance } from './compliance.js';
import { EventLog, isCode } from './watch-log.js';

/** Writes like an editor that saves safely: a temp file renamed over the old one. */
async function writeAtomically(path: string, text: string): Promise<void> {
  await writeFile(`${path}.tmp`, text);
  await rename(`${path}.tmp`, path);
}

async function withFile<T>(text: string, fn: (path: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'podwire-cluster-'));
  try {
    const path = join(dir, 'cluster.yaml');
    await writeFile(path, text);
    return await fn(path);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

clusterStoreCompliance('file', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'podwire-cluster-'));
  const path = join(dir, 'cluster.yaml');
  await writeFile(path, 'nodes: []\n');
  return {
    writable: false,
    dynamicLease: false,
    open: () => FileStore.open({ path, pollIntervalMs: 200 }),
    setNodes: (nodes: NodeRecord[]) => writeAtomically(path, stringify({ nodes })),
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
});

const GOOD = `
nodes:
  - name: a
    underlayIP: 192.168.50.1
    podCIDRs: [10.244.1.0/24]
`;

describe('FileStore: a bad file is refused with the key named', () => {
  const cases: [string, string, RegExp][] = [
    ['not YAML', 'nodes: [', /not valid YAML/],
    ['a list at the top', '- a\n', /\(top level\) must be a mapping/],
    ['unknown top-level key', 'nodez: []\n', /: nodez: unknown key/],
    ['nodes not a list', 'nodes: 5\n', /: nodes: must be a list/],
    ['a node not a mapping', 'nodes: [a]\n', /nodes\[0\]: must be a mapping/],
    ['bad name', 'nodes: [{name: Node_1, underlayIP: 10.0.0.1, podCIDRs: []}]', /nodes\[0\]\.name: /],
    [
      'bad underlay IP',
      'nodes: [{name: a, underlayIP: 10.0.0.300, podCIDRs: []}]',
      /nodes\[0\]\.underlayIP: /,
    ],
    [
      'host bits',
      'nodes: [{name: a, underlayIP: 10.0.0.1, podCIDRs: [10.244.1.1/24]}]',
      /nodes\[0\]\.podCIDRs\[0\]: .*host bits/,
    ],
    [
      'two IPv4 CIDRs',
      'nodes: [{name: a, underlayIP: 10.0.0.1, podCIDRs: [10.1.0.0/24, 10.2.0.0/24]}]',
      /nodes\[0\]\.podCIDRs\[1\]: a second IPv4/,
    ],
    ['a typo', 'nodes: [{name: a, underlayIP: 10.0.0.1, podCIDR: []}]', /nodes\[0\]\.podCIDR: unknown key/],
    [
      'bad MAC',
      'nodes: [{name: a, underlayIP: 10.0.0.1, podCIDRs: [], vtepMac: 1:2}]',
      /nodes\[0\]\.vtepMac: /,
    ],
    [
      'bad label',
      'nodes: [{name: a, underlayIP: 10.0.0.1, podCIDRs: [], labels: {x: 1}}]',
      /nodes\[0\]\.labels\.x: must be a string/,
    ],
    [
      'duplicate name',
      'nodes: [{name: a, underlayIP: 10.0.0.1, podCIDRs: []}, {name: a, underlayIP: 10.0.0.2, podCIDRs: []}]',
      /nodes\[1\]\.name: a is also nodes\[0\]/,
    ],
    [
      'overlapping CIDRs',
      'nodes: [{name: a, underlayIP: 10.0.0.1, podCIDRs: [10.244.0.0/16]}, {name: b, underlayIP: 10.0.0.2, podCIDRs: [10.244.3.0/24]}]',
      /nodes\[1\]\.podCIDRs\[0\]: 10\.244\.3\.0\/24 overlaps 10\.244\.0\.0\/16 of nodes\[0\] \(a\)/,
    ],
  ];
  for (const [what, text, re] of cases) {
    test(what, () =>
      withFile(text, async (path) => {
        await assert.rejects(
          FileStore.open({ path }),
          isCode('ERR_STORE', new RegExp(`cluster file ${path}.*${re.source}`)),
        );
      }),
    );
  }

  test('a missing file', async () => {
    await assert.rejects(
      FileStore.open({ path: '/nonexistent/cluster.yaml' }),
      isCode('ERR_STORE', /cluster\.yaml: cannot read/),
    );
  });

  test('JSON is accepted (it is YAML)', () =>
    withFile(
      JSON.stringify({ nodes: [{ name: 'a', underlayIP: '::1', podCIDRs: ['fd00::/64'] }] }),
      async (path) => {
        const store = await FileStore.open({ path });
        try {
          assert.deepEqual((await store.getNode('a'))?.node, {
            name: 'a',
            underlayIP: '::1',
            podCIDRs: ['fd00::/64'],
          });
        } finally {
          await store.close();
        }
      },
    ));
});

describe('FileStore: reloads', () => {
  test('a file turned bad keeps the last good nodes and shows in health; fixed, it applies', () =>
    withFile(GOOD, async (path) => {
      const store = await FileStore.open({ path, pollIntervalMs: 100 });
      const log = new EventLog(store);
      try {
        await log.waitFor((e) => e.length === 1);
        await writeAtomically(path, GOOD.replace('192.168.50.1', '192.168.50.300'));
        const deadline = Date.now() + 5000;
        while (store.health().ok && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        const health = store.health();
        assert.equal(health.ok, false);
        assert.match(health.error ?? '', /nodes\[0\]\.underlayIP/);
        assert.equal((await store.getNode('a'))?.node.underlayIP, '192.168.50.1');
        await writeAtomically(path, GOOD.replace('192.168.50.1', '192.168.50.2'));
        const events = await log.waitFor((e) => e.length === 2);
        assert.equal(events[1]?.type === 'put' && events[1].node.underlayIP, '192.168.50.2');
        assert.equal(store.health().ok, true);
      } finally {
        await store.close();
        await log.done;
      }
    }));

  test('rewriting the same nodes emits nothing; versions move only for changed records', () =>
    withFile(`${GOOD}  - {name: b, underlayIP: 192.168.50.2, podCIDRs: [10.244.2.0/24]}\n`, async (path) => {
      const store = await FileStore.open({ path, pollIntervalMs: 100 });
      const before = await store.listNodes();
      const log = new EventLog(store, before);
      try {
        await writeAtomically(
          path,
          `# same nodes, other text\n${GOOD}  - {name: b, underlayIP: 192.168.50.2, podCIDRs: [10.244.2.0/24]}\n`,
        );
        await new Promise((r) => setTimeout(r, 400));
        assert.deepEqual(log.events, []);
        await writeAtomically(
          path,
          `${GOOD}  - {name: b, underlayIP: 192.168.50.3, podCIDRs: [10.244.2.0/24]}\n`,
        );
        await log.waitFor((e) => e.length === 1);
        const after = await store.listNodes();
        assert.equal(after.nodes[0]?.version, before.nodes[0]?.version);
        assert.notEqual(after.nodes[1]?.version, before.nodes[1]?.version);
        assert.notEqual(after.revision, before.revision);
      } finally {
        await store.close();
      }
    }));
});

describe('FileStore: leases are what the file says', () => {
  const pool = { clusterCIDRs: ['10.244.0.0/16', 'fd00::/48'], nodeCIDRMaskSize: { ipv4: 24, ipv6: 64 } };
  test('errors name the node and what is missing', () =>
    withFile(
      `${GOOD}  - {name: b, underlayIP: 192.168.50.2, podCIDRs: [10.9.0.0/24, 'fd00::/64']}\n  - {name: c, underlayIP: 192.168.50.3, podCIDRs: []}\n`,
      async (path) => {
        const store = await FileStore.open({ path });
        try {
          await assert.rejects(
            store.leasePodCIDRs('a', pool),
            isCode('ERR_STORE', /node a has no IPv6 pod CIDR/),
          );
          await assert.rejects(
            store.leasePodCIDRs('b', pool),
            isCode('ERR_STORE', /node b's pod CIDR 10\.9\.0\.0\/24 is outside/),
          );
          await assert.rejects(
            store.leasePodCIDRs('c', pool),
            isCode('ERR_STORE', /node c has no IPv4 pod CIDR/),
          );
          await assert.rejects(
            store.leasePodCIDRs('zz', pool),
            isCode('ERR_STORE', /node zz is not in the file/),
          );
          const v4only = { clusterCIDRs: ['10.244.0.0/16'], nodeCIDRMaskSize: { ipv4: 24 } };
          assert.deepEqual(await store.leasePodCIDRs('a', v4only), ['10.244.1.0/24']);
        } finally {
          await store.close();
        }
      },
    ));
});
