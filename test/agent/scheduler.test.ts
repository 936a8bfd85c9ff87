/** Invariant I3: same key serialized in arrival order; different keys in parallel up to the bound. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Scheduler } from '../../src/agent/cni/scheduler.js';

test('calls on one key never overlap and run in arrival order', async () => {
  const s = new Scheduler(8);
  const order: number[] = [];
  let running = 0;
  await Promise.all(
    Array.from({ length: 10 }, (_, i) =>
      s.run('pod-a/eth0', async () => {
        running++;
        assert.equal(running, 1, 'only one call on the key at a time');
        await sleep(Math.random() * 5);
        order.push(i);
        running--;
      }),
    ),
  );
  assert.deepEqual(order, [...Array(10).keys()]);
});

test('a failing call does not block the next one on its key', async () => {
  const s = new Scheduler(2);
  await assert.rejects(
    s.run('k', async () => Promise.reject(new Error('boom'))),
    /boom/,
  );
  assert.equal(await s.run('k', async () => 42), 42);
  assert.equal(s.inFlight, 0);
});

test('different keys run in parallel, never more than the bound', async () => {
  const s = new Scheduler(3);
  let running = 0;
  let peak = 0;
  await Promise.all(
    Array.from({ length: 12 }, (_, i) =>
      s.run(`pod-${i}`, async () => {
        running++;
        peak = Math.max(peak, running);
        await sleep(5);
        running--;
      }),
    ),
  );
  assert.equal(peak, 3);
  assert.equal(s.inFlight, 0);
});

test('a same-key call waits for the running one even when slots are free', async () => {
  const s = new Scheduler(4);
  const events: string[] = [];
  const first = s.run('k', async () => {
    events.push('first-start');
    await sleep(20);
    events.push('first-end');
  });
  const second = s.run('k', async () => {
    events.push('second-start');
  });
  await Promise.all([first, second]);
  assert.deepEqual(events, ['first-start', 'first-end', 'second-start']);
});

test('the bound must be a positive integer', () => {
  assert.throws(() => new Scheduler(0), RangeError);
  assert.throws(() => new Scheduler(1.5), RangeError);
});

test('idle resolves once every queued and running call has settled', async () => {
  const s = new Scheduler(2);
  await s.idle();
  let done = 0;
  const calls = [1, 2, 3].map((i) =>
    s.run(`k${i % 2}`, async () => {
      await sleep(5);
      done++;
    }),
  );
  await s.idle();
  assert.equal(done, 3);
  await Promise.all(calls);
});

test('hooks: busy when the first call arrives, idle when the last settles, once per idle period', async () => {
  const events: string[] = [];
  const s = new Scheduler(2, { busy: () => events.push('busy'), idle: () => events.push('idle') });
  await Promise.all([
    s.run('a', () => sleep(10)),
    s.run('a', () => sleep(5)),
    s.run('b', () => sleep(15)),
    s.run('c', async () => Promise.reject(new Error('boom'))).catch(() => undefined),
  ]);
  assert.deepEqual(events, ['busy', 'idle']);
  await s.run('a', async () => undefined);
  assert.deepEqual(events, ['busy', 'idle', 'busy', 'idle']);
});
