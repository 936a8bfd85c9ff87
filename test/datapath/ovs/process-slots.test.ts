import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ProcessSlots } from '../../../src/datapath/ovs/process-slots.js';

test('never more than the limit at once; every call runs; failures free their slot', async () => {
  const slots = new ProcessSlots(3);
  let running = 0;
  let peak = 0;
  const results = await Promise.allSettled(
    Array.from({ length: 20 }, (_, i) =>
      slots.run(async () => {
        running++;
        peak = Math.max(peak, running);
        await sleep(2);
        running--;
        if (i % 5 === 0) throw new Error(`call ${i}`);
        return i;
      }),
    ),
  );
  assert.equal(peak, 3);
  assert.equal(results.filter((r) => r.status === 'fulfilled').length, 16);
  assert.equal(await slots.run(async () => 'after'), 'after');
});
