/**
 * IP pools as IPPool objects (src/cluster/kube-pools.ts, deploy/crd-ippool.yaml) against a real
 * kube-apiserver and etcd (bed/kube-api.ts), the CRD installed from deploy/ as users install it:
 *
 * - the pool seam's compliance suite, each client its own store with its own watch (two clients =
 *   two nodes);
 * - the CRD's schema refuses malformed pools at the API server (422, nothing stored);
 * - a pool the schema cannot refuse (START after END) is refused by the decoder: logged, counted in
 *   the cluster store's invalid records, absent from the pools, and the other pools work on;
 * - (the race of two nodes on one pool object is kube-pools-race.test.ts);
 * - `podwire pool` (the CLI, inside the API server's namespace) on IPPool objects.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { run } from '../../bed/exec.js';
import type { KubeApiServer } from '../../bed/kube-api.js';
import { ROOT } from '../../bed/node.js';
import { PodwireError } from '../../src/base/errors.js';
import type { IpPool } from '../../src/cluster/ip-pool.js';
import { IPPOOL_API_VERSION, IPPOOLS_PATH } from '../../src/cluster/kube-pools.js';
import { KubeStore } from '../../src/cluster/kube-store.js';
import type { KubeClient } from '../../src/kube/kube-client.js';
import { kubeconfigConnection } from '../../src/kube/kube-config.js';
import { poolStoreCompliance } from '../cluster/pool-store-compliance.js';
import { adminClient, Recorder, until } from './kube-harness.js';
import { closeNode, deleteAllPools, kubeApiForFile, openNode, type PoolNode } from './pool-harness.js';

const kubeApi = kubeApiForFile();

poolStoreCompliance('KubePoolStore (IPPool objects, a real kube-apiserver)', async () => {
  const s = await kubeApi();
  const opened: PoolNode[] = [];
  return {
    open: async () => {
      const n = openNode(s);
      opened.push(n);
      return n.store;
    },
    cleanup: async () => {
      for (const n of opened) await closeNode(n);
      await deleteAllPools(s);
    },
  };
});

/** A raw IPPool object, as `kubectl create` would send it. */
function ippool(name: string, spec: Record<string, unknown>): object {
  return { apiVersion: IPPOOL_API_VERSION, kind: 'IPPool', metadata: { name }, spec };
}

const GOOD_SPEC = {
  ranges: ['172.31.0.10-172.31.0.20'],
  subnet: { gateway: '172.31.0.1', prefixLength: 24 },
};

describe('IPPool: the schema and the decoder', { timeout: 180_000 }, () => {
  let s: KubeApiServer;
  let admin: KubeClient;
  before(async () => {
    s = await kubeApi();
    admin = adminClient(s);
  });
  after(async () => {
    admin?.close();
    if (s) await deleteAllPools(s);
  });

  const refused: Array<[string, Record<string, unknown>, RegExp]> = [
    ['bad-range', { ...GOOD_SPEC, ranges: ['172.31.0.10-'] }, /spec\.ranges/],
    ['bad-range-text', { ...GOOD_SPEC, ranges: ['172.31.0.10 to 172.31.0.20'] }, /spec\.ranges/],
    ['bad-cidr-length', { ...GOOD_SPEC, ranges: ['172.31.0.0/33'] }, /spec\.ranges/],
    ['bad-cidr-octet', { ...GOOD_SPEC, ranges: ['172.31.0.256/30'] }, /spec\.ranges/],
    ['no-ranges', { ...GOOD_SPEC, ranges: [] }, /spec\.ranges/],
    ['vlan-4095', { ...GOOD_SPEC, vlan: 4095 }, /spec\.vlan/],
    ['vlan-negative', { ...GOOD_SPEC, vlan: -1 }, /spec\.vlan/],
    ['bad-gateway', { ...GOOD_SPEC, subnet: { gateway: '172.31.0.300', prefixLength: 24 } }, /gateway/],
    ['bad-prefix', { ...GOOD_SPEC, subnet: { gateway: '172.31.0.1', prefixLength: 0 } }, /prefixLength/],
    ['no-subnet', { ranges: GOOD_SPEC.ranges }, /subnet/],
  ];
  for (const [name, spec, field] of refused) {
    it(`the API server refuses ${name} with 422 naming the field, and stores nothing`, async () => {
      const r = await admin.request('POST', IPPOOLS_PATH, { body: ippool(name, spec) });
      assert.equal(r.status, 422, r.body);
      assert.match(r.body, field);
      const get = await admin.request('GET', `${IPPOOLS_PATH}/${name}`);
      assert.equal(get.status, 404, get.body);
    });
  }

  it('a good pool is accepted (the schema is no wall), VLAN defaulted to 0', async () => {
    const r = await admin.request('POST', IPPOOLS_PATH, { body: ippool('good', GOOD_SPEC) });
    assert.equal(r.status, 201, r.body);
    assert.equal((JSON.parse(r.body) as { spec: { vlan: number } }).spec.vlan, 0);
  });

  it('the store refuses a bad pool itself with ERR_INVALID_CONFIG, before the API server', async () => {
    const n = openNode(s);
    try {
      const bad = {
        name: 'backwards',
        ranges: ['172.31.1.20-172.31.1.10'],
        subnet: { gateway: '172.31.1.1', prefixLength: 24 },
        vlan: 0,
      };
      await assert.rejects(n.store.createPool(bad as IpPool), (err: unknown) => {
        assert.ok(err instanceof PodwireError && err.code === 'ERR_INVALID_CONFIG', String(err));
        assert.match(String(err), /ranges\[0\].*END is before START/);
        return true;
      });
    } finally {
      await closeNode(n);
    }
  });

  it('START after END passes the schema; the decoder refuses it with a log line and a metric, touching nothing else', async () => {
    const rec = new Recorder<unknown>();
    const store = KubeStore.open({
      connection: kubeconfigConnection(s.kubeconfig),
      nodeName: 'n1',
      connect: s.connect,
      log: rec.log,
      pools: true,
    });
    try {
      const pools = store.pools;
      assert.ok(pools, 'pools: true offers pools');
      await until(() => pools.health().ok, 'the IPPool reflector listed');
      const before = store.invalidRecords ?? 0;
      const r = await admin.request('POST', IPPOOLS_PATH, {
        body: ippool('backwards', {
          ranges: ['172.31.1.20-172.31.1.10'],
          subnet: { gateway: '172.31.1.1', prefixLength: 24 },
        }),
      });
      assert.equal(r.status, 201, `the schema cannot order two addresses: ${r.body}`);
      await until(
        () => rec.lines.some((l) => l.event === 'kube-object-invalid' && l.fields.name === 'backwards'),
        'the invalid pool logged',
      );
      const line = rec.lines.find((l) => l.event === 'kube-object-invalid' && l.fields.name === 'backwards');
      assert.match(String(line?.fields.reason), /IPPool backwards: ranges\[0\]: .*END is before START/);
      assert.equal(store.invalidRecords, before + 1, 'counted (podwire_cluster_invalid_records_total)');
      assert.deepEqual(
        (await pools.listPools()).map((p) => p.name),
        ['good'],
        'absent from the pools; the good one stays',
      );
      await assert.rejects(
        pools.claim('backwards', '172.31.1.15', {
          node: 'n1',
          containerId: 'c1',
          ifname: 'eth0',
          createdAt: new Date().toISOString(),
        }),
        /END is before START/,
      );
      const claim = await pools.claim('good', '172.31.0.11', {
        node: 'n1',
        containerId: 'c2',
        ifname: 'eth0',
        createdAt: new Date().toISOString(),
      });
      assert.ok(claim, 'the other pools work on');
      assert.equal(await pools.release('good', claim), true);
      assert.ok(store.health().ok, 'the Node side of the store is untouched');
      assert.equal(
        await pools.deletePool('backwards'),
        true,
        'an invalid pool with nothing held can be deleted',
      );
    } finally {
      await store.close();
    }
  });
});

describe('podwire pool on IPPool objects', { timeout: 180_000 }, () => {
  it('create, list, show (with the holder), delete refused while held, then done', async () => {
    const s = await kubeApi();
    const config = join(s.dir, 'cli-agent.yaml');
    await writeFile(
      config,
      `nodeName: cli\nuplink: eth0\ncluster:\n  store: kubernetes\n  kubeconfig: ${s.kubeconfig}\n  pools: true\n`,
    );
    const cli = (...args: string[]) =>
      run('ip', ['netns', 'exec', s.netns, `${ROOT}/bin/podwire`, 'pool', ...args, '--config', config]);
    const node = openNode(s);
    try {
      const made = await cli(
        'create',
        'cli',
        '--ranges',
        '172.29.0.10-172.29.0.20',
        '--gateway',
        '172.29.0.1',
        '--prefix-length',
        '24',
        '--vlan',
        '7',
      );
      assert.equal(made.code, 0, made.stderr);
      assert.match(
        made.stdout,
        /created pool cli: 172\.29\.0\.10-172\.29\.0\.20 via 172\.29\.0\.1\/24, VLAN 7/,
      );
      const object = JSON.parse(await s.kubectlOk(['get', 'ippool', 'cli', '-o', 'json'])) as {
        spec: unknown;
      };
      assert.deepEqual(object.spec, {
        ranges: ['172.29.0.10-172.29.0.20'],
        subnet: { gateway: '172.29.0.1', prefixLength: 24 },
        vlan: 7,
      });
      const bad = await cli(
        'create',
        'cli2',
        '--ranges',
        '172.29.1.20-172.29.1.10',
        '--gateway',
        '172.29.1.1',
        '--prefix-length',
        '24',
      );
      assert.notEqual(bad.code, 0);
      assert.match(bad.stderr, /END is before START/);
      const claim = await node.store.claim('cli', '172.29.0.12', {
        node: 'n7',
        containerId: 'abcdef0123456789',
        ifname: 'eth0',
        pod: 'default/web-0',
        createdAt: '2026-01-01T00:00:00.000Z',
      });
      assert.ok(claim);
      const list = await cli('list', '--json');
      assert.equal(list.code, 0, list.stderr);
      assert.deepEqual(
        (JSON.parse(list.stdout) as Array<{ name: string; used: number; size: number }>).map((p) => [
          p.name,
          p.used,
          p.size,
        ]),
        [['cli', 1, 11]],
      );
      const show = await cli('show', 'cli');
      assert.equal(show.code, 0, show.stderr);
      assert.match(show.stdout, /1 of 11 in use/);
      assert.match(show.stdout, /172\.29\.0\.12\s+n7\s+default\/web-0\s+abcdef012345\s+eth0/);
      const refused = await cli('delete', 'cli');
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr, /1 address\(es\) still held: 172\.29\.0\.12 \(n7 default\/web-0\)/);
      assert.equal(await node.store.release('cli', claim), true);
      const deleted = await cli('delete', 'cli');
      assert.equal(deleted.code, 0, deleted.stderr);
      assert.equal((await s.kubectl(['get', 'ippool', 'cli'])).code, 1, 'gone from the API server');
    } finally {
      await closeNode(node);
      await deleteAllPools(s);
    }
  });
});
