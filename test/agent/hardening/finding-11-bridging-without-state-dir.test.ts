/**
 * Issue 15, finding 11: with fixed `podCIDRs` and `bridging`, the agent did not start on a node whose
 * `stateDir` did not exist yet (ENOENT on bridging.json.tmp: nothing had created the directory before
 * bridging saved the uplink's state). Depends on `mkdirSync` in `writeDurably`
 * (src/agent/startup/bridging.ts). Both datapaths share that code; the Linux bridge runs here.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { run } from '../../../bed/exec.js';
import { NamespaceSet } from '../../../bed/namespaces.js';
import { TestNode } from '../../../bed/node.js';

const spaces = new NamespaceSet();
let node: TestNode | undefined;
after(async () => {
  await node?.cleanup();
  await spaces.cleanup();
});

test('finding 11: a first start in bridging mode creates the state directory', async () => {
  const ns = await spaces.add('bridged');
  // An uplink with the node's address: one end of a veth whose peer stays in the same namespace.
  await run('ip', ['-n', ns, 'link', 'add', 'up0', 'type', 'veth', 'peer', 'name', 'wire0']);
  await run('ip', ['-n', ns, 'addr', 'add', '192.0.2.10/24', 'dev', 'up0']);
  await run('ip', ['-n', ns, 'link', 'set', 'up0', 'up']);
  await run('ip', ['-n', ns, 'link', 'set', 'wire0', 'up']);
  node = new TestNode({ nodeNs: ns, podCIDRs: ['10.244.71.0/24'], config: { bridging: { uplink: 'up0' } } });
  const stateDir = join(node.dir, 'state');
  assert.ok(!existsSync(stateDir), 'no state directory before the first start');
  await node.setup(); // throws with the agent's log when it does not start
  assert.ok(existsSync(join(stateDir, 'bridging.json')), 'the uplink state was saved');
  await node.stopAgent('SIGTERM');
  const up = JSON.parse((await run('ip', ['-n', ns, '-j', 'addr', 'show', 'up0'])).stdout) as Array<{
    addr_info: Array<{ local: string }>;
  }>;
  assert.deepEqual(
    up[0]?.addr_info.map((a) => a.local).filter((a) => !a.startsWith('fe80')),
    ['192.0.2.10'],
    'a clean stop gave the uplink its address back',
  );
});
