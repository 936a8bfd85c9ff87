/**
 * Issue 15, finding 11: with fixed `podCIDRs` and `bridging`, the agent did not start on a node whose
 * `stateDir` did not exist yet (ENOENT on bridging.json.tmp: nothing had created the directory before
 * bridging saved the uplink's state). Depends on `mkdirSync` in `writeDurably`
 * (src/agent/startup/bridging.ts). Both datapaths share that code; the Linux bridge runs here.
 *
 * Found with it (CI, under load): a SIGTERM in the moment after "agent started" killed the agent before
 * its signal handlers were in, with the uplink still in the bridge. The handlers now go in before the
 * start (src/cli/agent-command.ts); the second test signals in the middle of the start, where the old
 * code was always killed.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { run } from '../../../bed/exec.js';
import { NamespaceSet } from '../../../bed/namespaces.js';
import { TestNode } from '../../../bed/node.js';

const spaces = new NamespaceSet();
const nodes: TestNode[] = [];
after(async () => {
  for (const n of nodes) await n.cleanup();
  await spaces.cleanup();
});

/** A node namespace with an uplink that holds the node's address, and a node on it in bridging mode. */
async function bridgedNode(podCIDR: string): Promise<{ ns: string; node: TestNode }> {
  const ns = await spaces.add('bridged');
  // An uplink with the node's address: one end of a veth whose peer stays in the same namespace.
  await run('ip', ['-n', ns, 'link', 'add', 'up0', 'type', 'veth', 'peer', 'name', 'wire0']);
  await run('ip', ['-n', ns, 'addr', 'add', '192.0.2.10/24', 'dev', 'up0']);
  await run('ip', ['-n', ns, 'link', 'set', 'up0', 'up']);
  await run('ip', ['-n', ns, 'link', 'set', 'wire0', 'up']);
  const node = new TestNode({ nodeNs: ns, podCIDRs: [podCIDR], config: { bridging: { uplink: 'up0' } } });
  nodes.push(node);
  return { ns, node };
}

/** The uplink's addresses and its bridge, if any. */
async function uplink(ns: string): Promise<{ addresses: string[]; master: string | undefined }> {
  const up = JSON.parse((await run('ip', ['-n', ns, '-j', 'addr', 'show', 'up0'])).stdout) as Array<{
    master?: string;
    addr_info: Array<{ local: string }>;
  }>;
  return {
    addresses: (up[0]?.addr_info ?? []).map((a) => a.local).filter((a) => !a.startsWith('fe80')),
    master: up[0]?.master,
  };
}

test('finding 11: a first start in bridging mode creates the state directory', async () => {
  const { ns, node } = await bridgedNode('10.244.71.0/24');
  const stateDir = join(node.dir, 'state');
  assert.ok(!existsSync(stateDir), 'no state directory before the first start');
  await node.setup(); // throws with the agent's log when it does not start
  assert.ok(existsSync(join(stateDir, 'bridging.json')), 'the uplink state was saved');
  assert.equal(await node.stopAgent('SIGTERM'), 0, node.logs);
  assert.deepEqual(await uplink(ns), { addresses: ['192.0.2.10'], master: undefined }, node.logs);
});

test('a SIGTERM in the middle of the start stops the agent once started: the uplink gets its address back', async () => {
  const { ns, node } = await bridgedNode('10.244.72.0/24');
  // The uplink is in the bridge, the rest of the start still to come.
  await node.setup('uplink moved into the bridge');
  assert.equal(await node.stopAgent('SIGTERM'), 0, node.logs);
  assert.match(node.logs, /"msg":"signal while starting: stopping once started"/);
  assert.match(node.logs, /"msg":"agent stopped"/);
  assert.deepEqual(await uplink(ns), { addresses: ['192.0.2.10'], master: undefined }, node.logs);
});
