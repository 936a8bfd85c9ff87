/**
 * GroupCommit (src/datapath/ovs/group-commit.ts): what is submitted in one turn of the event loop
 * goes out as one batch, what comes while a batch is in flight waits for the next, and every caller
 * learns its batch's outcome. Depends on #drain's splice of the queue after setImmediate.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GroupCommit } from '../../../src/datapath/ovs/group-commit.js';

test('submissions of one turn share a batch; those made while it runs share the next', async () => {
  const batches: number[][] = [];
  let release: (() => void) | undefined;
  const gc = new GroupCommit<number>(async (items) => {
    batches.push(items);
    if (batches.length === 1) await new Promise<void>((r) => (release = r));
  });
  const first = [1, 2, 3].map((n) => gc.submit(n));
  await new Promise<void>((r) => setImmediate(r));
  await new Promise<void>((r) => setImmediate(r));
  const second = [4, 5].map((n) => gc.submit(n));
  assert.deepEqual(batches, [[1, 2, 3]], 'the first batch is in flight, the next waits');
  release?.();
  await Promise.all([...first, ...second]);
  assert.deepEqual(batches, [
    [1, 2, 3],
    [4, 5],
  ]);
});

test('a failed batch rejects each of its callers and the next batch still runs', async () => {
  let calls = 0;
  const gc = new GroupCommit<string>(async (items) => {
    calls++;
    if (items.includes('bad')) throw new Error('switch said no');
  });
  const results = await Promise.allSettled([gc.submit('a'), gc.submit('bad')]);
  assert.deepEqual(
    results.map((r) => r.status),
    ['rejected', 'rejected'],
  );
  await gc.submit('c');
  assert.equal(calls, 2);
});
