/** The agent as a process: a bad config stops it at start naming the key; SIGTERM stops it cleanly. */
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { after, test } from 'node:test';
import { run } from '../../bed/exec.js';
import { ROOT, TestNode } from '../../bed/node.js';

const node = new TestNode({ podCIDRs: ['10.244.11.0/24'] });
after(() => node.cleanup());

test('a bad configuration: exit 1, a JSON log line naming the key', async () => {
  await node.setup();
  await node.stopAgent('SIGTERM');
  writeFileSync(`${node.dir}/bad.yaml`, 'podCIDRs: ["10.0.0.0/24"]\nbridgeName: x\n');
  const r = await run('ip', [
    'netns',
    'exec',
    node.nodeNs,
    `${ROOT}/bin/podwire`,
    'agent',
    '--config',
    `${node.dir}/bad.yaml`,
  ]);
  assert.equal(r.code, 1);
  const line = JSON.parse(r.stderr.trim().split('\n').at(-1) as string) as { level: string; err: string };
  assert.equal(line.level, 'error');
  assert.match(line.err, /bridgeName: unknown key/);
});

test('SIGTERM: the agent drains, removes its socket and exits 0; pods keep working', async () => {
  await node.startAgent();
  const pod = await node.addPod('term');
  assert.equal((await node.cni({ command: 'ADD', containerId: 'term', netns: pod })).code, 0);
  assert.equal(await node.stopAgent('SIGTERM'), 0);
  assert.equal(existsSync(node.socket), false, 'socket removed');
  assert.match(node.logs, /"agent stopped"/);
  const ping = await run('ip', ['netns', 'exec', pod, 'ping', '-c', '1', '-W', '2', '10.244.11.1']);
  assert.equal(ping.code, 0, 'the datapath outlives the agent');
  const down = await node.cni({ command: 'ADD', containerId: 'term2', netns: pod, ifname: 'eth1' });
  assert.equal((down.json as { code: number }).code, 11, 'agent down: try again later');
  await node.startAgent();
  assert.equal((await node.cni({ command: 'DEL', containerId: 'term', netns: pod })).code, 0);
});
