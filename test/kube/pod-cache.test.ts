/**
 * The pod cache (src/cluster/kube-pod-cache.ts) against a real kube-apiserver 1.20 and etcd
 * (bed/kube-api.ts, watch cache off so that a compaction is a 410): Pods and Namespaces created,
 * relabelled and deleted through the API; a local pod attached (its ADD) before its Pod object
 * exists, filled in when it arrives; a 410 forced by compacting etcd under a cut-off watch loses no
 * event; and the decoders refuse malformed objects naming the field.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeApiServer } from '../../bed/kube-api.js';
import { namespaceFromObject, podFromObject } from '../../src/cluster/kube-pod.js';
import { PodCache, type PodCacheEvent } from '../../src/cluster/kube-pod-cache.js';
import type { KubeClient } from '../../src/kube/kube-client.js';
import type { Pod } from '../../src/policy/model.js';
import { adminClient, Gate, until } from './kube-harness.js';

function podObject(
  namespace: string,
  name: string,
  labels: Record<string, string>,
  ports: object[] = [],
  nodeName = 'node-a',
): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { namespace, name, labels },
    spec: {
      nodeName,
      automountServiceAccountToken: false,
      containers: [{ name: 'c', image: 'pause', ports }],
    },
  };
}

/** The pods and namespaces as a fresh list of the API server gives them: key -> resourceVersion. */
async function freshList(client: KubeClient, path: string): Promise<Map<string, string>> {
  const list = (await client.getJson(path)) as {
    items: { metadata: { namespace?: string; name: string; resourceVersion: string } }[];
  };
  return new Map(
    list.items.map((o) => [
      o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name,
      o.metadata.resourceVersion,
    ]),
  );
}

async function setPodIPs(client: KubeClient, ns: string, name: string, ips: string[]): Promise<void> {
  const r = await client.request('PATCH', `/api/v1/namespaces/${ns}/pods/${name}/status`, {
    body: { status: { podIP: ips[0], podIPs: ips.map((ip) => ({ ip })) } },
    contentType: 'application/merge-patch+json',
  });
  assert.equal(r.status, 200, r.body);
}

/** A Namespace deleted for good: without a namespace controller, its finalizer is cleared by hand. */
async function deleteNamespace(server: KubeApiServer, client: KubeClient, name: string): Promise<void> {
  await server.kubectlOk(['delete', 'namespace', name, '--wait=false']);
  const r = await client.request('PUT', `/api/v1/namespaces/${name}/finalize`, {
    body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name }, spec: { finalizers: [] } },
  });
  assert.equal(r.status, 200, r.body);
}

describe('pod cache: a real kube-apiserver', { timeout: 240_000 }, () => {
  let server: KubeApiServer;
  before(async () => {
    server = await KubeApiServer.start({ watchCache: false });
    for (const ns of ['default', 'alpha']) {
      if (ns !== 'default')
        await server.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
      await server.apply({
        apiVersion: 'v1',
        kind: 'ServiceAccount',
        metadata: { namespace: ns, name: 'default' },
      });
    }
  });
  after(async () => {
    await server?.cleanup();
  });

  it('follows pods and namespaces created, relabelled and deleted', async () => {
    const client = adminClient(server);
    const lines: string[] = [];
    const cache = new PodCache({
      client,
      nodeName: 'node-a',
      log: (e, f) => lines.push(`${e} ${JSON.stringify(f)}`),
    });
    cache.start();
    try {
      await cache.waitSynced();
      assert.ok(cache.synced);
      await server.apply({
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: { name: 'beta', labels: { team: 'b' } },
      });
      await until(() => cache.namespaceLabels('beta')?.team === 'b', 'namespace beta with its label');
      await server.kubectlOk(['label', 'namespace', 'beta', 'team=bb', '--overwrite']);
      await until(() => cache.namespaceLabels('beta')?.team === 'bb', 'namespace beta relabelled');

      await server.apply(
        podObject('alpha', 'web', { app: 'web' }, [
          { name: 'http', containerPort: 8080, protocol: 'TCP' },
          { containerPort: 53, protocol: 'UDP' },
        ]),
      );
      await until(() => cache.pod('alpha', 'web') !== undefined, 'pod alpha/web');
      await setPodIPs(client, 'alpha', 'web', ['10.1.0.5', 'fd00:0:0::5']);
      await until(() => (cache.pod('alpha', 'web')?.ips.length ?? 0) === 2, 'its IPs');
      assert.deepEqual(cache.pod('alpha', 'web'), {
        namespace: 'alpha',
        name: 'web',
        labels: { app: 'web' },
        ips: ['10.1.0.5', 'fd00::5'],
        ports: [
          { name: 'http', containerPort: 8080, protocol: 'TCP' },
          { containerPort: 53, protocol: 'UDP' },
        ],
        hostNetwork: false,
        node: 'node-a',
      } satisfies Pod);
      assert.equal(cache.localPod('alpha', 'web'), undefined, 'not attached here: not a local pod');

      await server.kubectlOk(['label', '-n', 'alpha', 'pod', 'web', 'app=api', '--overwrite']);
      await until(() => cache.pod('alpha', 'web')?.labels?.app === 'api', 'pod relabelled');
      await server.kubectlOk(['delete', '-n', 'alpha', 'pod', 'web', '--grace-period=0', '--force']);
      await until(() => cache.pod('alpha', 'web') === undefined, 'pod deleted');
      await deleteNamespace(server, client, 'beta');
      await until(() => cache.namespaceLabels('beta') === undefined, 'namespace deleted');
      assert.equal(cache.invalidObjects, 0, lines.join('\n'));
      assert.ok(cache.health().ok);
    } finally {
      await cache.stop();
      client.close();
    }
  });

  it('a pod ADDed before its Pod object is in the view at once, and filled in when it arrives', async () => {
    const client = adminClient(server);
    const cache = new PodCache({ client, nodeName: 'node-a', log: () => undefined });
    const events: PodCacheEvent[] = [];
    cache.subscribe((e) => events.push(e));
    cache.start();
    try {
      await cache.waitSynced();
      cache.attach({
        containerId: 'sandbox-1',
        ifname: 'eth0',
        namespace: 'alpha',
        name: 'early',
        ips: ['10.1.0.9'],
      });
      const early: Pod = {
        namespace: 'alpha',
        name: 'early',
        labels: null,
        ips: ['10.1.0.9'],
        ports: [],
        hostNetwork: false,
        node: 'node-a',
      };
      assert.deepEqual(cache.localPod('alpha', 'early'), early, 'wired from its ADD alone');
      assert.deepEqual(events.at(-1), { kind: 'pod', key: 'alpha/early', pod: early });
      await server.apply(podObject('alpha', 'early', { app: 'early' }, [{ containerPort: 80 }]));
      await until(() => cache.localPod('alpha', 'early')?.labels !== null, 'filled in');
      const filled = cache.localPod('alpha', 'early');
      assert.deepEqual(filled?.labels, { app: 'early' });
      assert.deepEqual(filled?.ips, ['10.1.0.9'], "a local pod's addresses are its IPAM's");
      assert.equal(
        cache.watchedPods().find((p) => p.name === 'early')?.labels?.app,
        'early',
        'watchedPods: the object as the watch has it',
      );
      assert.deepEqual(filled?.ports, [{ containerPort: 80, protocol: 'TCP' }]);
      assert.deepEqual(events.at(-1), { kind: 'pod', key: 'alpha/early', pod: filled });
      // a namesake of another UID (the runtime named its own) is not taken for this pod
      cache.attach({
        containerId: 'sandbox-2',
        ifname: 'eth0',
        namespace: 'alpha',
        name: 'early',
        uid: 'another-uid',
        ips: ['10.1.0.9'],
      });
      assert.equal(cache.localPod('alpha', 'early')?.labels, null, 'another UID: metadata not taken');
      cache.detach('sandbox-2', 'eth0');
      cache.detach('sandbox-1', 'eth0');
      assert.equal(cache.localPod('alpha', 'early'), undefined, 'DEL: no longer local');
      assert.deepEqual(
        cache.watchedPods().find((p) => p.name === 'early')?.ips,
        [],
        'the watch alone: the object has no status.podIPs',
      );
      assert.deepEqual(cache.pod('alpha', 'early')?.labels, { app: 'early' }, 'the watch still has it');
      await server.kubectlOk(['delete', '-n', 'alpha', 'pod', 'early', '--grace-period=0', '--force']);
      await until(() => cache.pod('alpha', 'early') === undefined, 'deleted');
    } finally {
      await cache.stop();
      client.close();
    }
  });

  it("an object without an attachment here loses an address this node's attachment holds (a stale status)", async () => {
    const client = adminClient(server);
    const cache = new PodCache({ client, nodeName: 'node-a', log: () => undefined });
    const events: PodCacheEvent[] = [];
    cache.subscribe((e) => events.push(e));
    /** The last event about the stale pod: its addresses as told. */
    const told = () => {
      const e = events.filter((x) => x.kind === 'pod' && x.key === 'alpha/stale').at(-1);
      return e?.kind === 'pod' ? e.pod?.ips : undefined;
    };
    cache.start();
    try {
      await cache.waitSynced();
      // The old pod was deleted here (DEL done), its object still terminating with its status.
      await server.apply(podObject('alpha', 'stale', { app: 'old' }));
      await setPodIPs(client, 'alpha', 'stale', ['10.1.0.20', 'fd00:1::20']);
      await until(() => cache.pod('alpha', 'stale')?.ips.length === 2, 'stale status seen');
      // IPAM gave 10.1.0.20 to a new pod, wired here before the old object went.
      cache.attach({
        containerId: 'sandbox-9',
        ifname: 'eth0',
        namespace: 'alpha',
        name: 'fresh',
        ips: ['10.1.0.20'],
      });
      assert.deepEqual(
        cache.pod('alpha', 'stale')?.ips,
        ['fd00:1::20'],
        "the attached address is not the object's",
      );
      assert.deepEqual(told(), ['fd00:1::20'], 'told as a change of its own');
      const holders = cache.pods().filter((p) => p.ips.includes('10.1.0.20'));
      assert.deepEqual(
        holders.map((p) => p.name),
        ['fresh'],
        'one pod holds the address in the whole view',
      );
      assert.deepEqual(
        cache.watchedPods().find((p) => p.name === 'stale')?.ips,
        ['10.1.0.20', 'fd00:1::20'],
        'the watch as it is',
      );
      cache.detach('sandbox-9', 'eth0');
      assert.deepEqual(
        cache.pod('alpha', 'stale')?.ips,
        ['10.1.0.20', 'fd00:1::20'],
        'DEL: the status stands again',
      );
      assert.deepEqual(told(), ['10.1.0.20', 'fd00:1::20'], 'told again');
      await server.kubectlOk(['delete', '-n', 'alpha', 'pod', 'stale', '--grace-period=0', '--force']);
      await until(() => cache.pod('alpha', 'stale') === undefined, 'deleted');
    } finally {
      await cache.stop();
      client.close();
    }
  });

  it('410 by compaction under a cut-off watch: relisted, no event lost', async () => {
    for (const n of ['g1', 'g2', 'g3']) await server.apply(podObject('alpha', n, { n }));
    const gate = new Gate();
    const client = adminClient(server, gate);
    const cache = new PodCache({
      client,
      nodeName: 'node-a',
      log: () => undefined,
      backoff: { initialMs: 100, maxMs: 500 },
    });
    const events: PodCacheEvent[] = [];
    cache.start();
    try {
      await cache.waitSynced();
      await until(() => cache.stats().pods.watches > 0 && cache.stats().namespaces.watches > 0, 'watching');
      cache.subscribe((e) => events.push(e));
      gate.close();
      await until(() => !cache.health().ok, 'cut off');
      assert.match(cache.health().error ?? '', /^pods: /, 'health names the watch');
      await server.kubectlOk(['delete', '-n', 'alpha', 'pod', 'g2', '--grace-period=0', '--force']);
      await server.kubectlOk(['label', '-n', 'alpha', 'pod', 'g1', 'while=away']);
      await server.apply(podObject('alpha', 'g4', { n: 'g4' }));
      await server.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'gamma' } });
      await server.compact();
      gate.open();
      const admin = adminClient(server);
      const pods = await freshList(admin, '/api/v1/pods');
      const namespaces = await freshList(admin, '/api/v1/namespaces');
      admin.close();
      const podsMatch = () =>
        cache.pods().length === pods.size &&
        [...pods.keys()].every((k) => cache.pod(...(k.split('/') as [string, string])));
      await until(
        () => podsMatch() && cache.namespaceLabels('gamma') !== undefined && cache.health().ok,
        'cache matches a fresh list',
        30_000,
      );
      assert.equal(cache.namespaces().length, namespaces.size);
      assert.deepEqual(cache.pod('alpha', 'g1')?.labels, { n: 'g1', while: 'away' });
      const summary = events
        .map((e) => (e.kind === 'pod' ? `${e.pod ? 'pod' : 'gone'} ${e.key}` : `ns ${e.name}`))
        .sort();
      assert.deepEqual(summary, ['gone alpha/g2', 'ns gamma', 'pod alpha/g1', 'pod alpha/g4']);
      assert.equal(cache.stats().pods.relists, 1, 'pods: one relist on 410');
      assert.equal(cache.stats().namespaces.relists, 1, 'namespaces: one relist on 410');
    } finally {
      await cache.stop();
      client.close();
    }
  });
});

describe('pod and namespace decoders', () => {
  const meta = { namespace: 'ns', name: 'p', resourceVersion: '1' };
  const good = {
    metadata: { uid: 'u1', labels: { a: 'b' } },
    spec: { nodeName: 'n1', containers: [{ ports: [{ containerPort: 80, name: 'web' }] }] },
    status: { podIPs: [{ ip: '10.0.0.1' }] },
  };
  it('decodes a valid Pod into the model', () => {
    assert.deepEqual(podFromObject(good, meta), {
      uid: 'u1',
      pod: {
        namespace: 'ns',
        name: 'p',
        labels: { a: 'b' },
        ips: ['10.0.0.1'],
        ports: [{ containerPort: 80, protocol: 'TCP', name: 'web' }],
        hostNetwork: false,
        node: 'n1',
      },
    });
  });
  const bad: Array<[string, unknown, RegExp]> = [
    ['label not a string', { ...good, metadata: { uid: 'u1', labels: { a: 1 } } }, /metadata\.labels\.a/],
    ['no uid', { ...good, metadata: {} }, /metadata\.uid/],
    ['no containers', { ...good, spec: { containers: [] } }, /spec\.containers/],
    ['port 0', { ...good, spec: { containers: [{ ports: [{ containerPort: 0 }] }] } }, /containerPort/],
    [
      'bad protocol',
      { ...good, spec: { containers: [{ ports: [{ containerPort: 1, protocol: 'ICMP' }] }] } },
      /protocol/,
    ],
    [
      'bad port name',
      { ...good, spec: { containers: [{ ports: [{ containerPort: 1, name: 'Web_1' }] }] } },
      /name/,
    ],
    ['bad pod IP', { ...good, status: { podIPs: [{ ip: '10.0.0.300' }] } }, /podIPs\[0\]/],
    ['hostNetwork not a boolean', { ...good, spec: { ...good.spec, hostNetwork: 'yes' } }, /hostNetwork/],
  ];
  for (const [what, object, field] of bad) {
    it(`refuses a Pod: ${what}`, () => {
      assert.throws(() => podFromObject(object, meta), field);
    });
  }
  it('refuses a Namespace whose labels are not strings', () => {
    assert.throws(
      () => namespaceFromObject({ metadata: { labels: { a: ['x'] } } }, { name: 'n', resourceVersion: '1' }),
      /Namespace n: metadata\.labels\.a/,
    );
    assert.deepEqual(namespaceFromObject({ metadata: {} }, { name: 'n', resourceVersion: '1' }), {
      name: 'n',
      labels: {},
    });
  });
});
