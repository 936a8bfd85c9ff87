/**
 * Cluster membership over etcd: 5 agents starting at once lease 5 distinct pod CIDRs and keep them
 * across a restart; a node that joins is reachable from the others within 5 s; a node that leaves
 * (`podwire node remove`) disappears from every peer's routes within 5 s.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type ClusterMember, TestCluster } from '../../bed/cluster.js';
import { ipJson, run } from '../../bed/exec.js';
import { ROOT, resultIps } from '../../bed/node.js';
import { pingFrom } from '../../bed/traffic.js';

async function podCIDROf(m: ClusterMember): Promise<string> {
  const r = await run(`${ROOT}/bin/podwire`, ['status', '--json', '--config', m.node.configPath]);
  assert.equal(r.code, 0, r.stderr);
  return (JSON.parse(r.stdout) as { podCIDRs: string[] }).podCIDRs.join(',');
}

/** Routes to peer pod CIDRs that podwire programmed on a node (protocol 250). */
async function peerRoutes(m: ClusterMember): Promise<string[]> {
  const routes = await ipJson<Array<{ dst: string; protocol?: string | number }>>(m.underlay.ns, [
    'route',
    'show',
    'proto',
    '250',
  ]);
  return routes.map((r) => r.dst).sort();
}

async function within(ms: number, check: () => Promise<boolean>): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await sleep(100);
  }
}

describe('cluster membership (etcd)', () => {
  const cluster = new TestCluster({ nodes: 5, store: 'etcd' });
  before(() => cluster.setup());
  after(() => cluster.cleanup());

  test('5 agents started at once lease 5 distinct CIDRs, and keep them across a restart', async () => {
    const cidrs = await Promise.all(cluster.members.map(podCIDROf));
    assert.equal(new Set(cidrs).size, 5, cidrs.join(' '));
    const m = cluster.members[2] as ClusterMember;
    await m.node.stopAgent('SIGTERM');
    await m.node.startAgent();
    assert.equal(await podCIDROf(m), cidrs[2]);
  });

  test('a joining node becomes reachable within 5 s; a leaving one is gone from every peer within 5 s', async () => {
    const first = cluster.members[0] as ClusterMember;
    const firstPod = await first.node.addPod('j0');
    const add0 = await first.node.cni({ command: 'ADD', containerId: 'join-0', netns: firstPod });
    assert.equal(add0.code, 0, add0.stdout);

    const joined = await cluster.join();
    const pod = await joined.node.addPod('j1');
    const add = await joined.node.cni({ command: 'ADD', containerId: 'join-1', netns: pod });
    assert.equal(add.code, 0, add.stdout);
    const ip = resultIps(add)[0] as string;
    const started = Date.now();
    assert.ok(await within(5000, () => pingFrom(firstPod, ip, 1)), 'reachable from node-0 within 5 s');
    assert.ok(await pingFrom(pod, resultIps(add0)[0] as string), 'and back');
    const joinedCidr = await podCIDROf(joined);
    process.stdout.write(`# join to reachable: ${Date.now() - started} ms\n`);

    await cluster.leave(joined, async () => {
      // Inside a node's namespace: the store is on the underlay, which only the nodes reach.
      const r = await run('ip', [
        'netns',
        'exec',
        first.underlay.ns,
        `${ROOT}/bin/podwire`,
        'node',
        'remove',
        joined.name,
        '--config',
        first.node.configPath,
      ]);
      assert.equal(r.code, 0, r.stderr);
    });
    for (const m of cluster.members) {
      assert.ok(
        await within(5000, async () => !(await peerRoutes(m)).includes(joinedCidr)),
        `${m.name} dropped its route to ${joinedCidr}`,
      );
    }
  });
});
