/**
 * The test bed's underlay bridge keeps one MAC while ports come and go (bed/underlay.ts). Without it
 * the bridge takes the lowest MAC of its ports; when that port leaves, every node still holds the old
 * MAC for the bridge's address (etcd's) and its packets go nowhere until the neighbour entry expires:
 * the bridged-node etcd stall of issue 16 (8 s timeouts, code 107, right after a port left).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ipJson, must } from '../../bed/exec.js';
import { pingFrom } from '../../bed/traffic.js';
import { UNDERLAY_BRIDGE, Underlay, type UnderlayNode } from '../../bed/underlay.js';

const underlay = new Underlay();
let node: UnderlayNode;

before(async () => {
  await underlay.setup();
  node = await underlay.addNode('mac');
});
after(() => underlay.cleanup());

const bridgeMac = async () =>
  (await ipJson<Array<{ address: string }>>(underlay.ns, ['link', 'show', UNDERLAY_BRIDGE]))[0]?.address;

test('a port with the lowest MAC comes and goes: the bridge keeps its MAC and a node still reaches it', async () => {
  const mac = await bridgeMac();
  // A port whose MAC is lower than any other (its peer stays in the underlay namespace).
  // biome-ignore format: argument pairs
  await must('ip', ['-n', underlay.ns, 'link', 'add', 'ullow', 'address', '00:00:00:00:00:01', 'type', 'veth', 'peer', 'name', 'ullowp']);
  await must('ip', ['-n', underlay.ns, 'link', 'set', 'ullow', 'master', UNDERLAY_BRIDGE, 'up']);
  assert.equal(await bridgeMac(), mac, 'a new port does not change the bridge MAC');
  assert.ok(await pingFrom(node.ns, underlay.hostIp, 1), 'the node reaches the bridge (and caches its MAC)');
  await must('ip', ['-n', underlay.ns, 'link', 'del', 'ullow']);
  assert.equal(await bridgeMac(), mac, 'nor does a port that leaves');
  assert.ok(await pingFrom(node.ns, underlay.hostIp, 1), 'the node still reaches the bridge at once');
});
