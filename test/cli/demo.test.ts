/** `bin/podwire demo` runs to completion, its exit code reflects the matrix, and nothing is left. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { run } from '../../bed/exec.js';
import { ROOT } from '../../bed/node.js';

test('the demo: all pairs reachable, no ARP identity leak, exit 0, nothing left behind', async () => {
  const r = await run(`${ROOT}/bin/podwire`, ['demo']);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /\[5\/5\] every pod reaches every pod/);
  assert.match(r.stdout, /no identity leak on the underlay/);
  assert.doesNotMatch(r.stdout, /FAIL/);
  assert.match(r.stdout, /removing everything \.\.\. done/);
  // The namespaces the demo printed (nodes and pods) are gone.
  const printed = new Set(r.stdout.match(/pwt-\d+-[0-9a-f]+-[a-z0-9]+/g) ?? []);
  assert.ok(printed.size >= 6, `the demo names its namespaces: ${[...printed].join(' ')}`);
  const left = (await run('ip', ['netns', 'list'])).stdout.split('\n').map((l) => l.split(' ')[0]);
  assert.deepEqual(
    left.filter((n) => n !== undefined && printed.has(n)),
    [],
  );
});
