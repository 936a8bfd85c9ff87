/**
 * Each guard that keeps `podwire gc` (reconcile while serving) out of calls in flight, alone. The
 * fault-injecting seams (fault/fault-plan.ts, `hold`) keep a call in flight at a chosen step, so each
 * case reaches exactly one guard; gc-race.test.ts covers them together under a burst.
 *
 * - busy keys: an ADD that holds its claim and has no veth yet is skipped at once; without the skip
 *   reconcile waits on the attachment's key for the whole ADD.
 * - re-check: an ADD that starts after reconcile listed the links (so its key was not busy and its
 *   veth not listed) and claims before reconcile lists the claims: judged again on its key, after
 *   the ADD, the veth is there and the claim is kept; without the re-check the live pod loses its
 *   address.
 * - CNI GC's busy veths: a DEL that released the claim but has not yet deleted its veth (it does so
 *   after answering, on the attachment's key) is in flight: GC, which lists links before claims,
 *   sees a veth with no claim, and must leave it to the DEL.
 * - reconcile's busy veths: the same window for `podwire gc` (reconcile while serving), which skips
 *   a veth whose key has a call in flight both when it first judges the veths and when it judges them
 *   again after listing the claims.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { hostVeths } from '../../bed/inspect.js';
import { resultIps } from '../../bed/node.js';
import { hostVethName } from '../../src/agent/cni/host-veth.js';
import type { ReconcileReport } from '../../src/agent/cni/reconcile.js';
import { controlSocketPath } from '../../src/agent/ops/control-server.js';
import { callAgent } from '../../src/cli/control-client.js';
import { FaultNode } from './fault/fault-node.js';

const node = new FaultNode({ podCIDRs: ['10.244.29.0/24'] });
before(() => node.setup());
after(() => node.cleanup());

const gc = () => callAgent(controlSocketPath(node.socket), 'gc') as Promise<ReconcileReport>;

/** Resolves to the value, or to 'timeout' after `ms`. */
async function within<T>(p: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<'timeout'>((r) => {
    timer = setTimeout(() => r('timeout'), ms);
  });
  try {
    return await Promise.race([p, t]);
  } finally {
    clearTimeout(timer);
  }
}

test('busy keys: reconcile skips an ADD that holds its claim before its veth exists', async () => {
  const pod = await node.addPod('busy');
  node.setFault({ id: 'busy', op: 'store.claim', nth: 1, when: 'hold-after' });
  const add = node.cni({ command: 'ADD', containerId: 'gc-busy', netns: pod });
  try {
    for (const deadline = Date.now() + 10_000; node.claims().length === 0; await sleep(20)) {
      assert.ok(Date.now() < deadline, 'the ADD claimed its address');
    }
    assert.deepEqual(await hostVeths(node.nodeNs), [], 'no veth yet: the ADD is held after its claim');
    const report = await within(gc(), 3000);
    assert.notEqual(
      report,
      'timeout',
      'reconcile answered while the ADD was in flight (the key was skipped)',
    );
    assert.deepEqual((report as ReconcileReport).released, []);
  } finally {
    node.setFault(undefined);
  }
  const out = await add;
  assert.equal(out.code, 0, out.stdout);
  assert.deepEqual(
    node.claims().map((c) => c.ip),
    resultIps(out),
  );
  assert.equal((await node.cni({ command: 'DEL', containerId: 'gc-busy', netns: pod })).code, 0);
});

test('re-check: an ADD that starts after the listing of links keeps its claim', async () => {
  const pod = await node.addPod('recheck');
  // Reconcile has listed the busy keys and the links, and waits before listing the claims.
  node.setFault({ id: 'recheck', op: 'store.list', nth: 1, when: 'hold' });
  const report = gc();
  let out: Awaited<ReturnType<typeof node.cni>>;
  try {
    await sleep(300);
    out = await node.cni({ command: 'ADD', containerId: 'gc-recheck', netns: pod });
    assert.equal(out.code, 0, out.stdout);
  } finally {
    node.setFault(undefined);
  }
  const r = await report;
  assert.deepEqual(r.released, [], 'reconcile released nothing');
  assert.deepEqual(
    node.claims().map((c) => c.ip),
    resultIps(out),
    'the pod keeps its address',
  );
  assert.deepEqual(await hostVeths(node.nodeNs), [hostVethName('gc-recheck', 'eth0')]);
  assert.equal((await node.cni({ command: 'DEL', containerId: 'gc-recheck', netns: pod })).code, 0);
});

test('CNI GC leaves alone the veth of a DEL in flight (claim released, veth not yet deleted)', async () => {
  const pod = await node.addPod('gcdel');
  const add = await node.cni({ command: 'ADD', containerId: 'gc-del', netns: pod });
  assert.equal(add.code, 0, add.stdout);
  const veth = hostVethName('gc-del', 'eth0');
  node.setFault({ id: 'gcdel', op: 'store.release', nth: 1, when: 'hold-after' });
  const del = node.cni({ command: 'DEL', containerId: 'gc-del', netns: pod });
  try {
    for (const deadline = Date.now() + 10_000; node.claims().length > 0; await sleep(20)) {
      assert.ok(Date.now() < deadline, 'the DEL released the claim');
    }
    const gcOut = await within(node.cni({ command: 'GC', conf: { 'cni.dev/valid-attachments': [] } }), 5000);
    assert.notEqual(gcOut, 'timeout', 'GC answered while the DEL was in flight');
    assert.equal((gcOut as { code: number }).code, 0);
    assert.ok((await hostVeths(node.nodeNs)).includes(veth), 'the DEL in flight still has its veth');
  } finally {
    node.setFault(undefined);
  }
  const out = await del;
  assert.equal(out.code, 0, out.stdout);
});

test('podwire gc leaves alone the veth of a DEL in flight (claim released, veth not yet deleted)', async () => {
  const pod = await node.addPod('rcdel');
  const add = await node.cni({ command: 'ADD', containerId: 'rc-del', netns: pod });
  assert.equal(add.code, 0, add.stdout);
  const veth = hostVethName('rc-del', 'eth0');
  node.setFault({ id: 'rcdel', op: 'store.release', nth: 1, when: 'hold-after' });
  const del = node.cni({ command: 'DEL', containerId: 'rc-del', netns: pod });
  try {
    for (const deadline = Date.now() + 10_000; node.claims().length > 0; await sleep(20)) {
      assert.ok(Date.now() < deadline, 'the DEL released the claim');
    }
    const report = await within(gc(), 5000);
    assert.notEqual(report, 'timeout', 'reconcile answered while the DEL was in flight');
    assert.deepEqual((report as ReconcileReport).vethsRemoved, [], 'reconcile removed no veth');
    assert.ok((await hostVeths(node.nodeNs)).includes(veth), 'the DEL in flight still has its veth');
  } finally {
    node.setFault(undefined);
  }
  const out = await del;
  assert.equal(out.code, 0, out.stdout);
  // The DEL deletes its veth after answering, on the attachment's key.
  for (const deadline = Date.now() + 10_000; (await hostVeths(node.nodeNs)).includes(veth); await sleep(20)) {
    assert.ok(Date.now() < deadline, 'the DEL removed its veth itself');
  }
});
