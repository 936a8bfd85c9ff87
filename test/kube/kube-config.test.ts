/**
 * Where the API server is and how podwire authenticates (src/kube/kube-config.ts, kube-client.ts),
 * against a real kube-apiserver: the in-cluster service account with its token file rotated under a
 * running client, a kubeconfig with a client certificate and one with a token file; and the
 * kubeconfigs and environments refused, each naming what is wrong.
 */
import assert from 'node:assert/strict';
import { copyFile, mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { stringify as stringifyYaml } from 'yaml';
import { KubeApiServer } from '../../bed/kube-api.js';
import { storeFailure } from '../../src/cluster/store.js';
import { KubeClient } from '../../src/kube/kube-client.js';
import { inClusterConnection, kubeconfigConnection } from '../../src/kube/kube-config.js';

describe('kube config and credentials: a real kube-apiserver', { timeout: 180_000 }, () => {
  let server: KubeApiServer;
  let dir: string;
  before(async () => {
    server = await KubeApiServer.start();
    dir = await mkdtemp(join(tmpdir(), 'pwt-kubecfg-'));
    // What the agent's service account may do: read Nodes (the RBAC, in part).
    await server.apply(
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name: 'podwire-test' },
        rules: [{ apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] }],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name: 'podwire-test' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'podwire-test' },
        subjects: [{ kind: 'ServiceAccount', name: 'podwire', namespace: 'kube-system' }],
      },
    );
  });
  after(async () => {
    await server?.cleanup();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('in-cluster: the service account token, read again when the kubelet rotates the file', async () => {
    const sa = join(dir, 'sa');
    await mkdir(sa);
    await copyFile(server.pki.ca, join(sa, 'ca.crt'));
    const tokenA = await server.serviceAccountToken('kube-system', 'podwire');
    await writeFile(join(sa, 'token'), tokenA);
    const conn = inClusterConnection(
      { KUBERNETES_SERVICE_HOST: server.host, KUBERNETES_SERVICE_PORT: String(server.port) },
      sa,
    );
    const client = new KubeClient(conn, { connect: server.connect });
    try {
      assert.equal((await client.request('GET', '/api/v1/nodes')).status, 200);
      // not allowed to read pods: the token is the service account's, not an admin's
      assert.equal((await client.request('GET', '/api/v1/pods')).status, 403);
      // the kubelet replaces the file (write beside, rename over): a bad token is seen at once
      await writeFile(join(sa, 'token.new'), 'not-a-token');
      await rename(join(sa, 'token.new'), join(sa, 'token'));
      const refused = await client.getJson('/api/v1/nodes').catch((e: unknown) => e);
      assert.equal(storeFailure(refused), 'rejected');
      assert.match(String(refused), /HTTP 401/);
      const tokenB = await server.serviceAccountToken('kube-system', 'podwire');
      await writeFile(join(sa, 'token.new'), tokenB);
      await rename(join(sa, 'token.new'), join(sa, 'token'));
      assert.equal((await client.request('GET', '/api/v1/nodes')).status, 200);
    } finally {
      client.close();
    }
  });

  it('a kubeconfig with a client certificate, and one with a token file and inline CA data', async () => {
    const certClient = new KubeClient(kubeconfigConnection(server.kubeconfig), { connect: server.connect });
    assert.equal((await certClient.request('GET', '/api/v1/pods')).status, 200);
    certClient.close();
    const tokenFile = join(dir, 'kc-token');
    await writeFile(tokenFile, await server.serviceAccountToken('kube-system', 'podwire'));
    const kc = join(dir, 'token.kubeconfig');
    await writeFile(
      kc,
      stringifyYaml({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [
          {
            name: 'c',
            cluster: {
              server: server.url,
              'certificate-authority-data': Buffer.from(server.caText()).toString('base64'),
            },
          },
        ],
        users: [{ name: 'u', user: { tokenFile: 'kc-token' } }],
        contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
        'current-context': 'x',
      }),
    );
    const tokenClient = new KubeClient(kubeconfigConnection(kc), { connect: server.connect });
    assert.equal((await tokenClient.request('GET', '/api/v1/nodes')).status, 200);
    tokenClient.close();
  });

  it('a server certificate that does not chain to the configured CA is refused (rejected, not unreachable)', async () => {
    const conn = kubeconfigConnection(server.kubeconfig);
    const other = await server.clientCert('not-a-ca', '/CN=not-a-ca');
    const client = new KubeClient({ ...conn, ca: await readFile(other.cert) }, { connect: server.connect });
    const err = await client.getJson('/api/v1/nodes').catch((e: unknown) => e);
    assert.equal(storeFailure(err), 'rejected', String(err));
    client.close();
  });

  it('refuses what it cannot use, naming it', async () => {
    const write = async (name: string, doc: unknown): Promise<string> => {
      const p = join(dir, name);
      await writeFile(p, stringifyYaml(doc));
      return p;
    };
    const cluster = { server: server.url, 'certificate-authority': server.pki.ca };
    const base = (user: object, c: object = cluster) => ({
      clusters: [{ name: 'c', cluster: c }],
      users: [{ name: 'u', user }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    });
    const cases: [string, unknown, RegExp][] = [
      ['exec', base({ exec: { command: 'x' } }), /user key exec is not supported/],
      [
        'insecure',
        base({ token: 't' }, { ...cluster, 'insecure-skip-tls-verify': true }),
        /cluster key insecure-skip-tls-verify/,
      ],
      [
        'http',
        base({ token: 't' }, { server: 'http://1.2.3.4', 'certificate-authority': server.pki.ca }),
        /must be https/,
      ],
      ['noca', base({ token: 't' }, { server: server.url }), /no certificate-authority/],
      ['nouser', base({}), /no client certificate and no token/],
      ['halfcert', base({ 'client-certificate': server.pki.adminCert }), /go together/],
      ['nocontext', { ...base({ token: 't' }), 'current-context': 'y' }, /context "y" not found/],
    ];
    for (const [name, doc, re] of cases) {
      assert.throws(() => kubeconfigConnection(`${dir}/${name}`), /cannot read/);
      const p = await write(name, doc);
      assert.throws(() => kubeconfigConnection(p), re, name);
    }
    assert.throws(() => inClusterConnection({}, dir), /KUBERNETES_SERVICE_HOST/);
    assert.throws(
      () =>
        inClusterConnection(
          { KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' },
          join(dir, 'none'),
        ),
      /service account token: cannot read/,
    );
  });
});
