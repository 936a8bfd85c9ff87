/**
 * `cluster: {store: kubernetes}` for nodes (src/cluster/kube-store.ts) against a real kube-apiserver:
 * Node objects as node records (spec.podCIDRs, InternalIP, the agent's annotation), the agent's
 * own Node written with its node credentials (system:node:NAME, which the API server also refuses
 * on any other Node), compare-and-swap, the watch, invalid Nodes skipped and counted, and the pod
 * CIDRs waited for until the Node has them.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeApiServer } from '../../bed/kube-api.js';
import { KubeStore, NODE_ANNOTATION } from '../../src/cluster/kube-store.js';
import { registerNode } from '../../src/cluster/register.js';
import type { NodeEvent } from '../../src/cluster/store.js';
import { KubeClient } from '../../src/kube/kube-client.js';
import { kubeconfigConnection } from '../../src/kube/kube-config.js';
import { adminClient, nodeObject, until } from './kube-harness.js';

/** Sets a Node's status addresses (the kubelet's job), through the status subresource. */
async function setInternalIP(client: KubeClient, name: string, ...ips: string[]): Promise<void> {
  const r = await client.request('PATCH', `/api/v1/nodes/${name}/status`, {
    body: { status: { addresses: ips.map((address) => ({ type: 'InternalIP', address })) } },
    contentType: 'application/merge-patch+json',
  });
  assert.equal(r.status, 200, r.body);
}

describe('KubeStore: Node objects as the cluster store, a real kube-apiserver', { timeout: 180_000 }, () => {
  let server: KubeApiServer;
  let admin: KubeClient;
  let store: KubeStore;
  const lines: { event: string; fields: Record<string, unknown> }[] = [];
  before(async () => {
    server = await KubeApiServer.start();
    admin = adminClient(server);
    await server.grantAgentReads('system:nodes');
    await server.apply(
      nodeObject('n1', { podCIDRs: ['10.250.1.0/24'] }),
      nodeObject('n2', { podCIDRs: ['10.250.2.0/24'] }),
    );
    await setInternalIP(admin, 'n1', '172.30.0.1', 'fd00:30::1');
    await setInternalIP(admin, 'n2', '172.30.0.2');
    const cert = await server.clientCert('node-n1', '/CN=system:node:n1/O=system:nodes');
    const kubeconfig = await server.writeKubeconfig('node-n1', cert);
    store = KubeStore.open({
      connection: kubeconfigConnection(kubeconfig),
      nodeName: 'n1',
      connect: server.connect,
      log: (event, fields) => lines.push({ event, fields }),
      leasePollMs: 100,
    });
  });
  after(async () => {
    await store?.close();
    admin?.close();
    await server?.cleanup();
  });

  it('lists Nodes as records: spec.podCIDRs and the InternalIP', async () => {
    const list = await store.listNodes();
    assert.deepEqual(
      list.nodes.map((s) => s.node),
      [
        {
          name: 'n1',
          underlayIP: '172.30.0.1',
          podCIDRs: ['10.250.1.0/24'],
        },
        { name: 'n2', underlayIP: '172.30.0.2', podCIDRs: ['10.250.2.0/24'] },
      ],
    );
    // healthy once every watch has listed: the Nodes above, and the Pods and Namespaces (decision 47)
    await store.podCache.waitSynced();
    assert.ok(store.health().ok);
    // (1.20 keeps one pod CIDR per Node unless its IPv6DualStack feature gate is on)
    assert.deepEqual(await store.leasePodCIDRs('n1', { clusterCIDRs: [], nodeCIDRMaskSize: {} }), [
      '10.250.1.0/24',
    ]);
  });

  it("publishes the agent's part on its own Node only; the rest must agree with the Node", async () => {
    const desired = {
      name: 'n1',
      underlayIP: 'fd00:30::1',
      podCIDRs: ['10.250.1.0/24'],
      vtepMac: '02:00:00:00:01:01',
    };
    const stored = await registerNode(store, desired);
    assert.equal(stored.node.vtepMac, '02:00:00:00:01:01');
    await eventually(
      async () => (await store.getNode('n1'))?.node.vtepMac === '02:00:00:00:01:01',
      'the annotation seen by the watch',
    );
    // the family the agent published picks the InternalIP
    assert.equal((await store.getNode('n1'))?.node.underlayIP, 'fd00:30::1');
    const cur = await store.getNode('n1');
    assert.ok(cur);
    // stale version: no write
    const stale = await store.putNode({ ...desired, vtepMac: '02:00:00:00:01:02' }, { version: '1' });
    assert.equal(stale.ok, false);
    await assert.rejects(
      store.putNode({ ...desired, underlayIP: '172.30.0.9' }, { version: cur.version }),
      /not one of the Node's InternalIPs/,
    );
    await assert.rejects(
      store.putNode({ ...desired, podCIDRs: ['10.250.9.0/24'] }, { version: cur.version }),
      /not the Node's spec.podCIDRs/,
    );
    await assert.rejects(store.putNode({ ...desired, name: 'n2' }, 'absent'), /writes only its own Node/);
    // and the API server itself refuses node n1's credentials on n2
    const n1 = new KubeClient(kubeconfigConnection(`${server.dir}/node-n1.kubeconfig`), {
      connect: server.connect,
    });
    const r = await n1.request('PATCH', '/api/v1/nodes/n2', {
      body: { metadata: { annotations: { [NODE_ANNOTATION]: '{}' } } },
      contentType: 'application/merge-patch+json',
    });
    n1.close();
    assert.equal(r.status, 403, r.body);
    await assert.rejects(store.deleteNode('n2'), /podwire node remove is not needed/);
  });

  it('watch: a Node added, one turned invalid (skipped, logged, counted), one deleted', async () => {
    const ctl = new AbortController();
    const events: NodeEvent[] = [];
    const since = await store.listNodes();
    const done = (async () => {
      for await (const e of store.watchNodes({ signal: ctl.signal, since })) events.push(e);
    })();
    const seen = (): string[] => events.map((e) => `${e.type} ${e.node.name}`);
    try {
      await server.apply(nodeObject('n3', { podCIDRs: ['10.250.3.0/24'] }));
      await setInternalIP(admin, 'n3', '172.30.0.3');
      await until(
        () => seen().includes('put n3'),
        'n3 put',
        20_000,
        () => seen().join(', '),
      );
      await server.kubectlOk(['annotate', 'node', 'n2', `${NODE_ANNOTATION}={"vtepMac":"zz:zz"}`]);
      await until(
        () => seen().includes('delete n2'),
        'n2 gone as invalid',
        20_000,
        () => seen().join(', '),
      );
      // n3 was invalid too for a moment: created before its status had an InternalIP
      assert.equal(store.invalidRecords, 2, JSON.stringify(lines));
      const line = lines.find((l) => l.event === 'kube-object-invalid' && l.fields.name === 'n2');
      assert.equal(line?.fields.name, 'n2');
      assert.match(String(line?.fields.reason), /Node n2.vtepMac: must be a MAC address/);
      await server.kubectlOk(['delete', 'node', 'n3']);
      await until(
        () => seen().includes('delete n3'),
        'n3 deleted',
        20_000,
        () => seen().join(', '),
      );
      assert.deepEqual(
        (await store.listNodes()).nodes.map((s) => s.node.name),
        ['n1'],
      );
    } finally {
      ctl.abort();
      await done;
    }
  });

  it('pod CIDRs are waited for until the Node has them', async () => {
    await server.apply(nodeObject('n4'));
    await setInternalIP(admin, 'n4', '172.30.0.4');
    const lease = store.leasePodCIDRs(
      'n4',
      { clusterCIDRs: [], nodeCIDRMaskSize: {} },
      { signal: AbortSignal.timeout(30_000) },
    );
    let settled = false;
    void lease.finally(() => {
      settled = true;
    });
    await eventually(async () => (await store.getNode('n4')) !== undefined, 'n4 listed');
    assert.equal(settled, false);
    await server.kubectlOk([
      'patch',
      'node',
      'n4',
      '-p',
      '{"spec":{"podCIDR":"10.250.4.0/24","podCIDRs":["10.250.4.0/24"]}}',
    ]);
    assert.deepEqual(await lease, ['10.250.4.0/24']);
  });
});

async function eventually(pred: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await pred())) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
