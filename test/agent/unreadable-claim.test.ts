/**
 * A torn (or foreign) claim file in the agent's IPAM store (store.ts, `UnreadableClaim`): the agent
 * starts and serves, the address stays taken (never handed out), reconcile (agent start, `podwire gc`)
 * and CNI GC leave the file alone and remove no claimless veth while it is there (one may be its pod),
 * one warning names the file, and `podwire ipam`, status and the metrics show it. Once an operator
 * removes the file, the address is free again and the next reconcile removes the claimless veth.
 *
 * Depends on: FileStore.list listing such a file in `unreadable` instead of rejecting (file-store.ts,
 * `readClaimFile`'s `unreadable` result); with the listing rejecting, as before, the agent does not
 * start at all (NodeLocalAllocator.open fails). The veth part depends on reconcile's
 * `if (unreadable.length > 0)` keep (reconcile.ts); without it `podwire gc` removes the veth.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { hostVeths } from '../../bed/inspect.js';
import { metricSample, scrapeMetrics } from '../../bed/metrics.js';
import { resultIps, TestNode } from '../../bed/node.js';
import type { ReconcileReport } from '../../src/agent/cni/reconcile.js';
import type { IpamRow } from '../../src/agent/ops/control-methods.js';
import { controlSocketPath } from '../../src/agent/ops/control-server.js';
import { callAgent } from '../../src/cli/control-client.js';
import { run } from '../../src/process/run.js';

const RANGE = '10.244.57.0/29'; // assignable: .2 - .6
const PORT = 19157;
const node = new TestNode({ podCIDRs: [RANGE], config: { metricsAddress: `127.0.0.1:${PORT}` } });
const rangeDir = join(node.dir, 'state', 'ipam', '10.244.57.0_29');
const torn = join(rangeDir, '10.244.57.3');
/** A podwire-named veth that no claim explains (as the pod of the torn claim would have). */
const ORPHAN = 'pw0123456789abc';

before(async () => {
  mkdirSync(rangeDir, { recursive: true });
  writeFileSync(torn, '{"containerId": "c-lost", "ifna'); // cut short mid-record
  await node.setup();
});
after(() => node.cleanup());

const control = <T>(method: string) => callAgent(controlSocketPath(node.socket), method) as Promise<T>;
const warnings = () =>
  node.logs.split('\n').filter((l) => l.includes('"unreadable IPAM claim') && l.includes(torn));

test('the agent starts over a torn claim file and warns once, naming the file and why', async () => {
  assert.equal(warnings().length, 1, node.logs);
  assert.match(warnings()[0] ?? '', /"reason":"not JSON"/);
  assert.match(warnings()[0] ?? '', /"ip":"10\.244\.57\.3"/);
});

test('reconcile and CNI GC leave the file and a claimless veth alone; ipam, status and metrics show it', async () => {
  await run('ip', ['-n', node.nodeNs, 'link', 'add', ORPHAN, 'type', 'veth', 'peer', 'name', 'orphanpeer']);
  const report = await control<ReconcileReport>('gc');
  assert.deepEqual(report.released, []);
  assert.deepEqual(report.vethsRemoved, []);
  assert.deepEqual(report.vethsKept, [ORPHAN]);
  assert.equal(report.unreadable, 1);
  const gc = await node.cni({ command: 'GC', conf: { 'cni.dev/valid-attachments': [] } });
  assert.equal(gc.code, 0, gc.stdout);
  assert.ok(existsSync(torn), 'the torn file is still there');
  assert.ok((await hostVeths(node.nodeNs)).includes(ORPHAN), 'the claimless veth is still there');

  const rows = await control<IpamRow[]>('ipam');
  assert.deepEqual(rows, [
    {
      range: RANGE,
      size: '5',
      used: '1',
      unreadable: [{ ip: '10.244.57.3', file: torn, reason: 'not JSON' }],
    },
  ]);
  const status = await control<{ unreadableClaims: unknown[] }>('status');
  assert.deepEqual(status.unreadableClaims, [
    { range: RANGE, ip: '10.244.57.3', file: torn, reason: 'not JSON' },
  ]);
  const text = await scrapeMetrics(node.nodeNs, PORT);
  assert.equal(metricSample(text, `podwire_ipam_unreadable_claims{range="${RANGE}"}`), 1);
  assert.equal(metricSample(text, `podwire_ipam_addresses_used{range="${RANGE}"}`), 1);
  assert.equal(warnings().length, 1, 'still one warning after several listings');
});

test('allocation skips the address; once the file is removed, it is free again', async () => {
  const got: string[] = [];
  for (let i = 0; i < 4; i++) {
    const out = await node.cni({ command: 'ADD', containerId: `u${i}`, netns: await node.addPod(`u${i}`) });
    assert.equal(out.code, 0, out.stdout);
    got.push(...resultIps(out));
  }
  assert.deepEqual(got.sort(), ['10.244.57.2', '10.244.57.4', '10.244.57.5', '10.244.57.6']);
  const full = await node.cni({ command: 'ADD', containerId: 'u4', netns: await node.addPod('u4') });
  assert.notEqual(full.code, 0, 'the range is full: the torn claim is taken');

  // The operator's way out: remove the file, then `podwire gc`.
  rmSync(torn);
  const report = await control<ReconcileReport>('gc');
  assert.equal(report.unreadable, 0);
  assert.deepEqual(report.vethsRemoved, [ORPHAN]);
  const out = await node.cni({ command: 'ADD', containerId: 'u5', netns: await node.addPod('u5') });
  assert.equal(out.code, 0, out.stdout);
  assert.deepEqual(resultIps(out), ['10.244.57.3']);
  for (const id of ['u0', 'u1', 'u2', 'u3', 'u5']) {
    assert.equal((await node.cni({ command: 'DEL', containerId: id })).code, 0);
  }
});
