/**
 * The cluster store goes away (etcd stopped for PODWIRE_OUTAGE_S seconds, 10 by default; the soak
 * script runs 30): cross-node traffic goes on without a lost packet, ADD keeps working on a node whose
 * CIDR is known (even after an agent restart), STATUS shows the outage, and the agents recover.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type ClusterMember, TestCluster } from '../../bed/cluster.js';
import { run } from '../../bed/exec.js';
import { ROOT, resultIps } from '../../bed/node.js';

const OUTAGE_S = Number(process.env.PODWIRE_OUTAGE_S ?? 10);

const cluster = new TestCluster({ nodes: 2, store: 'etcd' });
before(() => cluster.setup());
after(() => cluster.cleanup());

async function storeHealthy(m: ClusterMember): Promise<boolean> {
  const r = await run(`${ROOT}/bin/podwire`, ['status', '--json', '--config', m.node.configPath]);
  return (JSON.parse(r.stdout) as { cluster: { health: { ok: boolean } } }).cluster.health.ok;
}

/**
 * `ping -i 0.2` for `seconds`; resolves with [sent, received]. A deadline (`-w`), not `-W`: with `-W`
 * ping waits only two round trips (microseconds here) for the last reply, so on a loaded machine a
 * reply that was merely late counted as lost.
 */
function continuousPing(ns: string, ip: string, seconds: number): Promise<[number, number]> {
  return new Promise((resolve, reject) => {
    const count = Math.ceil(seconds * 5);
    const deadline = String(Math.ceil(seconds) + 3);
    const child = spawn(
      'ip',
      ['netns', 'exec', ns, 'ping', '-i', '0.2', '-w', deadline, '-c', String(count), ip],
      {
        stdio: ['ignore', 'pipe', 'ignore'],
      },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.on('error', reject);
    child.on('close', () => {
      const m = /(\d+) packets transmitted, (\d+) received/.exec(out);
      if (!m) reject(new Error(`no ping summary: ${out}`));
      else resolve([Number(m[1]), Number(m[2])]);
    });
  });
}

test(`etcd down for ${OUTAGE_S} s: traffic goes on, ADD works, the agents recover`, async (t) => {
  const [a, b] = cluster.members as [ClusterMember, ClusterMember];
  const podA = await a.node.addPod('oa');
  const podB = await b.node.addPod('ob');
  assert.equal((await a.node.cni({ command: 'ADD', containerId: 'out-a', netns: podA })).code, 0);
  const addB = await b.node.cni({ command: 'ADD', containerId: 'out-b', netns: podB });
  assert.equal(addB.code, 0);
  const ipB = resultIps(addB)[0] as string;

  const ping = continuousPing(podA, ipB, OUTAGE_S + 4);
  await sleep(1000);
  await cluster.etcd?.stop();
  await sleep(2000);
  assert.equal(await storeHealthy(a), false, 'podwire status shows the outage');
  const status = await a.node.cni({ command: 'STATUS' });
  assert.equal((status.json as { code?: number }).code, 51, `CNI STATUS reports it: ${status.stdout}`);

  const during = await a.node.addPod('od');
  const add = await a.node.cni({ command: 'ADD', containerId: 'out-during', netns: during });
  assert.equal(add.code, 0, `ADD during the outage: ${add.stdout}`);

  await b.node.stopAgent('SIGTERM');
  await b.node.startAgent(); // leases nothing: it uses the CIDR it remembers
  const afterRestart = await b.node.addPod('or');
  assert.equal(
    (await b.node.cni({ command: 'ADD', containerId: 'out-restart', netns: afterRestart })).code,
    0,
  );

  await sleep(Math.max(0, OUTAGE_S * 1000 - 2000));
  await cluster.etcd?.restart();
  const [sent, received] = await ping;
  t.diagnostic(`continuous ping across the outage: ${received}/${sent}`);
  assert.equal(received, sent, 'no packet lost');

  const deadline = Date.now() + 15_000;
  while (!((await storeHealthy(a)) && (await storeHealthy(b)))) {
    assert.ok(Date.now() < deadline, 'both agents see the store again within 15 s');
    await sleep(250);
  }
  assert.equal((await a.node.cni({ command: 'STATUS' })).code, 0, 'CNI STATUS is fine again');
});
