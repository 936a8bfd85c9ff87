/**
 * `cluster: {store: kubernetes}` with two real agents in node namespaces and a real kube-apiserver
 * on the underlay (no etcd of podwire's; the API server's own etcd is its business): each agent
 * takes its pod CIDR from its Node's spec.podCIDRs and publishes its VTEP MAC in its own Node's
 * annotation, pods on the two nodes reach each other over VXLAN, and a Node deleted is removed from
 * the other node's routes and FDB; a malformed Node is skipped with a log line; a node's own Node
 * coming back with another pod CIDR is refused loudly and the running CIDR stays.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type ClusterMember, TestCluster } from '../../bed/cluster.js';
import { ipJson, must } from '../../bed/exec.js';
import { resultIps } from '../../bed/node.js';
import { pingFrom } from '../../bed/traffic.js';
import { NODE_ANNOTATION } from '../../src/cluster/kube-store.js';
import { VXLAN_DEVICE } from '../../src/datapath/overlay/vxlan-overlay.js';

async function peerRoutes(m: ClusterMember): Promise<string[]> {
  const routes = await ipJson<Array<{ dst: string }>>(m.underlay.ns, ['route', 'show', 'proto', '250']);
  return routes.map((r) => r.dst).sort();
}

/** `bridge fdb show dev podwire-vxlan`: the underlay IPs of the remote VTEPs. */
async function vtepDestinations(m: ClusterMember): Promise<string[]> {
  const out = await must('bridge', ['-n', m.underlay.ns, '-j', 'fdb', 'show', 'dev', VXLAN_DEVICE]);
  const fdb = JSON.parse(out === '' ? '[]' : out) as Array<{ dst?: string }>;
  return [...new Set(fdb.map((e) => e.dst).filter((d): d is string => d !== undefined))].sort();
}

async function within(ms: number, check: () => Promise<boolean>): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await sleep(100);
  }
}

describe('cluster store: kubernetes (two agents, a real kube-apiserver)', { timeout: 300_000 }, () => {
  const cluster = new TestCluster({ nodes: 2, store: 'kubernetes' });
  before(() => cluster.setup());
  after(() => cluster.cleanup());

  test('pods on two nodes reach each other; a Node deleted leaves the other node routes and FDB', async () => {
    assert.equal(cluster.etcd, undefined, 'no etcd of podwire');
    const [a, b] = cluster.members as [ClusterMember, ClusterMember];
    const kube = cluster.kube;
    assert.ok(kube);
    // each agent published its part on its own Node
    for (const m of [a, b]) {
      const ann = await kube.kubectlOk([
        'get',
        'node',
        m.name,
        '-o',
        `jsonpath={.metadata.annotations.podwire\\.io/node}`,
      ]);
      const published = JSON.parse(ann) as { underlayIP: string; vtepMac?: string };
      assert.equal(published.underlayIP, m.underlay.ip);
      assert.match(
        published.vtepMac ?? '',
        /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/,
        `${m.name}: ${NODE_ANNOTATION}`,
      );
    }
    const podA = await a.node.addPod('ka');
    const addA = await a.node.cni({ command: 'ADD', containerId: 'kube-a', netns: podA });
    assert.equal(addA.code, 0, addA.stdout);
    const podB = await b.node.addPod('kb');
    const addB = await b.node.cni({ command: 'ADD', containerId: 'kube-b', netns: podB });
    assert.equal(addB.code, 0, addB.stdout);
    const ipA = resultIps(addA)[0] as string;
    const ipB = resultIps(addB)[0] as string;
    assert.match(ipA, /^10\.250\.0\./, 'node-0 pod from its Node spec.podCIDRs');
    assert.match(ipB, /^10\.250\.1\./, 'node-1 pod from its Node spec.podCIDRs');
    assert.ok(await within(10_000, () => pingFrom(podA, ipB, 1)), 'a -> b');
    assert.ok(await pingFrom(podB, ipA), 'b -> a');
    assert.deepEqual(await peerRoutes(a), ['10.250.1.0/24']);
    assert.deepEqual(await vtepDestinations(a), [b.underlay.ip]);

    await kube.kubectlOk(['delete', 'node', b.name]);
    assert.ok(
      await within(10_000, async () => (await peerRoutes(a)).length === 0),
      'route to node-1 removed',
    );
    assert.ok(
      await within(10_000, async () => (await vtepDestinations(a)).length === 0),
      'FDB entry to node-1 removed',
    );
    assert.equal(await pingFrom(podA, ipB, 1), false, 'node-1 pods unreachable once its Node is gone');

    // A malformed Node (no agent behind it): skipped by node-0 with a log line naming it; nothing else moves.
    await kube.registerNode('node-9', ['10.250.9.0/24'], '172.30.9.9');
    await kube.kubectlOk(['annotate', 'node', 'node-9', `${NODE_ANNOTATION}={"vtepMac":"not-a-mac"}`]);
    assert.ok(
      await within(10_000, async () => /"kube-object-invalid".*"name":"node-9"/.test(a.node.logs)),
      'node-0 logs the invalid Node',
    );
    // (valid for a moment between its registration and the annotation: its route comes and goes)
    assert.ok(
      await within(10_000, async () => (await peerRoutes(a)).length === 0),
      'no route from the invalid Node',
    );

    // node-0's own Node comes back with another pod CIDR: refused loudly, the running CIDR stays.
    await kube.kubectlOk(['delete', 'node', a.name]);
    await kube.registerNode(a.name, ['10.250.7.0/24'], a.underlay.ip);
    assert.ok(
      await within(10_000, async () => /pod CIDRs changed in the cluster store: refused/.test(a.node.logs)),
      'node-0 refuses the change of its own CIDRs',
    );
    const podA2 = await a.node.addPod('ka2');
    const addA2 = await a.node.cni({ command: 'ADD', containerId: 'kube-a2', netns: podA2 });
    assert.equal(addA2.code, 0, addA2.stdout);
    assert.match(resultIps(addA2)[0] as string, /^10\.250\.0\./, 'new pods still from the CIDR it runs with');
    assert.ok(await pingFrom(podA2, ipA), 'and they reach the pods already running');
  });
});
