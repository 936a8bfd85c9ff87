/**
 * Issue 15, finding 1: etcd was spoken in plain http with no authentication
 * (`cluster/etcd-gateway.ts:62` at 0a550f2): whoever reached etcd could rewrite node records,
 * leases and pools, and podwire could not share kubeadm's etcd, which requires TLS. On that commit
 * every test here fails: an http endpoint is accepted silently, and `tls`, `auth` and `insecure` are
 * unknown keys.
 *
 * Now: an http endpoint is refused unless the operator says `insecure: true`, and then the agent
 * warns at start; agents reach an etcd that requires client certificates and a user (Debian's etcd,
 * certificates made with openssl, bed/pki.ts) and lease their CIDRs and register; an agent whose
 * CA does not sign etcd's certificate does not start, and says why (decided in
 * `EtcdStore.open`: a rejection is a configuration to fix, which waiting would not).
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type ClusterMember, TestCluster } from '../../../bed/cluster.js';
import type { EtcdServer } from '../../../bed/etcd.js';
import { run } from '../../../bed/exec.js';
import { ROOT } from '../../../bed/node.js';
import type { TestPki } from '../../../bed/pki.js';
import { parseAgentConfig } from '../../../src/agent/config.js';
import { openClusterStore, parseClusterStoreConfig } from '../../../src/cluster/config.js';
import { isCode } from '../../cluster/watch-log.js';

function agentConfig(cluster: string): void {
  parseAgentConfig(`
cluster: ${cluster}
clusterCIDRs: [10.244.0.0/16]
nodeCIDRMaskSize: {ipv4: 24}
nodeName: node-a
uplink: eth0
`);
}

async function statusOf(m: ClusterMember): Promise<{ podCIDRs: string[] }> {
  const r = await run(`${ROOT}/bin/podwire`, ['status', '--json', '--config', m.node.configPath]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as { podCIDRs: string[] };
}

describe('finding 1: the cluster store is not spoken in plain http unless the operator says so', () => {
  test('an http endpoint is refused, naming the key and the way out', () => {
    assert.throws(
      () => agentConfig('{store: etcd, endpoints: ["http://127.0.0.1:2379"]}'),
      isCode(
        'ERR_INVALID_CONFIG',
        /^agent config: cluster\.endpoints\[0\]: "http:\/\/127\.0\.0\.1:2379" is plain http: .*Use https:\/\/ with cluster\.tls, or set cluster\.insecure: true/,
      ),
    );
    agentConfig('{store: etcd, endpoints: ["http://127.0.0.1:2379"], insecure: true}');
    agentConfig(
      '{store: etcd, endpoints: ["https://127.0.0.1:2379"], tls: {ca: /etc/podwire/etcd/ca.crt, cert: /etc/podwire/etcd/tls.crt, key: /etc/podwire/etcd/tls.key}}',
    );
  });

  describe('insecure: true', () => {
    const cluster = new TestCluster({ nodes: 1, store: 'etcd' });
    before(() => cluster.setup());
    after(() => cluster.cleanup());

    test('the agent starts over http and warns at start', () => {
      const m = cluster.members[0] as ClusterMember;
      const warning = m.node.logs
        .split('\n')
        .filter((l) => l.includes('"warn"') && l.includes('cluster store over plain http'));
      assert.equal(warning.length, 1, m.node.logs);
      assert.match(warning[0] as string, /"endpoints":\["http:\/\/172\.30\.0\.254:2379"\]/);
    });
  });

  describe('TLS with client certificates and an etcd user', () => {
    const password = 'podwire-test-password';
    let passwordFile = '';
    let ca = '';
    const cluster: TestCluster = new TestCluster({
      nodes: 2,
      store: 'etcd',
      etcd: { tls: true },
      prepareEtcd: async (etcd) => {
        passwordFile = join(cluster.dir, 'etcd-password');
        writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });
        await etcd.enableAuth([{ name: 'podwire', password, prefix: '/podwire' }]);
        ca = (etcd.pki as TestPki).ca;
      },
      storeConfig: (etcd) => {
        const pki = etcd.pki as TestPki;
        return {
          tls: { ca, cert: pki.clientCert, key: pki.clientKey },
          auth: { username: 'podwire', passwordFile },
        };
      },
    });
    before(() => cluster.setup());
    after(() => cluster.cleanup());

    test('agents lease distinct pod CIDRs and register their records, over https with a token', async () => {
      const etcd = cluster.etcd as EtcdServer;
      assert.match(etcd.endpoint, /^https:/);
      const cidrs = await Promise.all(cluster.members.map(async (m) => (await statusOf(m)).podCIDRs));
      assert.equal(new Set(cidrs.map((c) => c.join(','))).size, 2, JSON.stringify(cidrs));
      for (const m of cluster.members) assert.doesNotMatch(m.node.logs, /plain http/);
      const store = await openClusterStore(parseClusterStoreConfig(cluster.storeConfig), {
        connect: etcd.connect,
      });
      try {
        const nodes = (await store.listNodes()).nodes.map((s) => s.node);
        assert.deepEqual(
          nodes.map((n) => [n.name, n.underlayIP, n.podCIDRs]),
          cluster.members.map((m, i) => [m.name, m.underlay.ip, cidrs[i]]),
        );
      } finally {
        await store.close();
      }
    });

    test('the CLI opens the same store with the same configuration: podwire pool create and list', async () => {
      const m = cluster.members[0] as ClusterMember;
      const cli = (args: string[]) =>
        run('ip', [
          'netns',
          'exec',
          m.underlay.ns,
          `${ROOT}/bin/podwire`,
          'pool',
          ...args,
          '--config',
          m.node.configPath,
        ]);
      const created = await cli([
        'create',
        'tls-blue',
        '--ranges',
        '172.30.0.200-172.30.0.210',
        '--gateway',
        '172.30.0.254',
        '--prefix-length',
        '24',
      ]);
      assert.equal(created.code, 0, created.stderr);
      const listed = await cli(['list']);
      assert.equal(listed.code, 0, listed.stderr);
      assert.match(listed.stdout, /tls-blue/);
    });

    test("an agent whose cluster.tls.ca did not sign etcd's certificate does not start, and says why", async () => {
      const good = ca;
      ca = ((cluster.etcd as EtcdServer).pki as TestPki).otherCa;
      try {
        await assert.rejects(cluster.join(), (err: Error) => {
          assert.match(err.message, /^agent exited 1:/);
          assert.match(
            err.message,
            /TLS: the server's certificate is not signed by a CA in cluster\.tls\.ca/,
          );
          return true;
        });
      } finally {
        ca = good;
      }
      assert.equal(cluster.members.length, 2);
    });
  });
});
