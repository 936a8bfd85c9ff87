/**
 * Issue 25: an IP pool with addresses in a node's pod CIDR would give one address to a pool pod on the
 * underlay and to a plain pod of the node. `podwire pool create` refuses it, naming the pool's range
 * and the pod CIDR (a registered node's, or the clusterCIDRs a later node's is cut from); a pool the
 * store holds anyway (another tool, an older CLI) makes the agent refuse to start, naming both.
 *
 * Depends on `poolOverlap` (src/cluster/ip-pool.ts), called by `refusePodCIDRs` in
 * src/cli/pool-command.ts and `refuseOverlaps` in src/agent/startup/pool-start.ts.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { TestCluster } from '../../bed/cluster.js';
import { run } from '../../bed/exec.js';
import { ROOT } from '../../bed/node.js';
import { EtcdStore } from '../../src/cluster/etcd-store.js';

const CLI = `${ROOT}/bin/podwire`;
const cluster = new TestCluster({ nodes: 1, store: 'etcd', trafficMode: 'noEncap' });
let store: EtcdStore;
/** node-0's IPv4 pod CIDR's first three octets ("10.250.N"). */
let net = '';

function pool(...args: string[]) {
  const m = cluster.members[0];
  if (!m) throw new Error('no node');
  return run('ip', ['netns', 'exec', m.underlay.ns, CLI, 'pool', ...args, '--config', m.node.configPath]);
}

before(async () => {
  await cluster.setup();
  const etcd = cluster.etcd;
  if (!etcd) throw new Error('etcd');
  store = await EtcdStore.open({ endpoints: [etcd.endpoint], connect: etcd.connect, requestTimeoutMs: 8000 });
  const cidr = (await store.listNodes()).nodes[0]?.node.podCIDRs[0] ?? '';
  const m = /^(10\.250\.\d+)\.0\/24$/.exec(cidr);
  if (!m?.[1]) throw new Error(`node-0's pod CIDR: ${cidr}`);
  net = m[1];
});
after(async () => {
  await store?.close();
  await cluster.cleanup();
});

test("pool create refuses ranges in a node's pod CIDR or in the clusterCIDRs, naming both", async () => {
  const inNode = await pool(
    'create',
    'red',
    '--ranges',
    `${net}.100-${net}.110`,
    '--gateway',
    `${net}.1`,
    '--prefix-length',
    '24',
  );
  assert.equal(inNode.code, 1, inNode.stdout);
  assert.match(
    inNode.stderr,
    new RegExp(
      `pool red: range ${net}\\.100-${net}\\.110 overlaps the pod CIDR ${net}\\.0/24 of node node-0`,
    ),
  );
  const other = net === '10.250.200' ? '10.250.201' : '10.250.200';
  const inCluster = await pool(
    'create',
    'green',
    '--ranges',
    `${other}.0/28`,
    '--gateway',
    `${other}.254`,
    '--prefix-length',
    '24',
  );
  assert.equal(inCluster.code, 1, inCluster.stdout);
  assert.match(
    inCluster.stderr,
    new RegExp(`pool green: range ${other}\\.0/28 overlaps the pod CIDR 10\\.250\\.0\\.0/16 \\(clusterCIDRs`),
  );
  assert.deepEqual(
    (await store.pools.listPools()).map((p) => p.name),
    [],
    'nothing was created',
  );
  const outside = await pool(
    'create',
    'blue',
    '--ranges',
    '172.30.0.100-172.30.0.110',
    '--gateway',
    '172.30.0.254',
    '--prefix-length',
    '24',
  );
  assert.equal(outside.code, 0, outside.stderr);
});

test('an agent does not start while a pool overlaps its pod CIDR, and says which; it starts once it is gone', async () => {
  const m = cluster.members[0];
  if (!m) throw new Error('no node');
  // Straight into the store, as a tool that does not check would.
  assert.ok(
    await store.pools.createPool({
      name: 'red',
      ranges: [`${net}.100-${net}.110`],
      subnet: { gateway: `${net}.1`, prefixLength: 24 },
      vlan: 0,
    }),
  );
  await m.node.stopAgent();
  await assert.rejects(m.node.startAgent(), (err: Error) => {
    assert.match(err.message, /^agent exited 1:/);
    assert.match(
      err.message,
      new RegExp(`pool red: range ${net}\\.100-${net}\\.110 overlaps this node's pod CIDR ${net}\\.0/24`),
    );
    return true;
  });
  assert.ok(await store.pools.deletePool('red'));
  await m.node.startAgent();
});
