/**
 * IdleRelease: one full collection and malloc_trim once the scheduler has been idle for the quiet
 * period, never while a call runs; and the real agent does it (its node flags expose the collection).
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { TestNode } from '../../bed/node.js';
import { Scheduler } from '../../src/agent/cni/scheduler.js';
import { silentLogger } from '../../src/agent/log.js';
import { IDLE_RELEASE_QUIET_MS, IdleRelease } from '../../src/agent/ops/idle-release.js';
import { mallocTrim } from '../../src/kernel/libc.js';

const QUIET = 40;

function recorder(withGc = true) {
  const calls: string[] = [];
  const release = new IdleRelease({
    quietMs: QUIET,
    gc: withGc ? () => calls.push('gc') : undefined,
    trim: () => calls.push('trim'),
    log: silentLogger,
  });
  return { calls, release, scheduler: new Scheduler(4, release) };
}

test('one collection, then one trim, a quiet period after the last call', async () => {
  const { calls, release, scheduler } = recorder();
  await Promise.all([scheduler.run('a', () => sleep(10)), scheduler.run('b', () => sleep(20))]);
  await sleep(QUIET / 2);
  assert.deepEqual(calls, [], 'not before the quiet period');
  await sleep(QUIET * 2);
  assert.deepEqual(calls, ['gc', 'trim']);
  await sleep(QUIET * 2);
  assert.equal(release.releases, 1, 'once per idle period');
});

test('a call within the quiet period restarts it; none while a call runs', async () => {
  const { calls, release, scheduler } = recorder();
  await scheduler.run('a', async () => undefined);
  await sleep(QUIET / 2);
  const long = scheduler.run('b', () => sleep(QUIET * 3));
  await sleep(QUIET * 2);
  assert.deepEqual(calls, [], 'busy: nothing released');
  await long;
  await sleep(QUIET / 2);
  assert.deepEqual(calls, [], 'the quiet period starts again at the last call');
  await sleep(QUIET * 2);
  assert.equal(release.releases, 1);
});

test('without an exposed collection it still trims; close cancels a pending release', async () => {
  const { calls, release, scheduler } = recorder(false);
  await scheduler.run('a', async () => undefined);
  await sleep(QUIET * 2);
  assert.deepEqual(calls, ['trim']);
  await scheduler.run('a', async () => undefined);
  release.close();
  await scheduler.run('a', async () => undefined);
  await sleep(QUIET * 2);
  assert.equal(release.releases, 1, 'nothing after close');
});

test('malloc_trim through koffi returns', () => {
  assert.equal(typeof mallocTrim(), 'boolean');
});

const node = new TestNode({ podCIDRs: ['10.244.25.0/24'] });
after(() => node.cleanup());

test('the agent collects and trims once it has been idle', async () => {
  await node.setup();
  const pod = await node.addPod('idle');
  assert.equal((await node.cni({ command: 'ADD', containerId: 'idle', netns: pod })).code, 0);
  assert.equal((await node.cni({ command: 'DEL', containerId: 'idle', netns: pod })).code, 0);
  const deadline = Date.now() + IDLE_RELEASE_QUIET_MS + 5000;
  while (!node.logs.includes('"idle: memory released"') && Date.now() < deadline) await sleep(50);
  const line = node.logs.split('\n').find((l) => l.includes('"idle: memory released"'));
  assert.ok(line, `no release logged: ${node.logs}`);
  const fields = JSON.parse(line) as { gcMs?: number; trimMs: number; rssMiB: number[] };
  assert.equal(typeof fields.gcMs, 'number', 'the bed starts the agent with --expose-gc');
  assert.equal(fields.rssMiB.length, 2);
});
