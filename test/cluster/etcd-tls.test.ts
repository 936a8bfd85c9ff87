/**
 * The etcd store over TLS with client certificates and etcd's users (issue 15, finding 1), against
 * Debian's etcd started with `--client-cert-auth` and certificates made for it with openssl
 * (bed/pki.ts), in a namespace of its own. Every store is opened the way the agent opens it: from a
 * parsed `cluster:` section, through `openClusterStore`, which reads the files it names.
 *
 * Outcomes shown: a trusted server and an accepted client certificate serve reads, writes and the
 * watch; a server certificate from another CA, or one that does not name the endpoint, and a
 * missing or foreign client certificate each fail the open with a message saying which; with etcd
 * down at open the store opens unhealthy and the health names the certificate failure once etcd
 * answers. With auth on: no credentials, a wrong password, a user without permission on the prefix
 * each fail the open clearly; the right ones serve, and an expired token is renewed.
 */
import assert from 'node:assert/strict';
import { copyFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { EtcdServer } from '../../bed/etcd.js';
import type { TestPki } from '../../bed/pki.js';
import {
  type ClusterStoreExtras,
  openClusterStore,
  parseClusterStoreConfig,
} from '../../src/cluster/config.js';
import type { ClusterStore, NodeRecord } from '../../src/cluster/store.js';
import { FAST } from './etcd-harness.js';
import { EventLog, isCode } from './watch-log.js';

const TTL_S = 2;

describe('etcd over TLS with client certificates, and etcd auth', () => {
  let server: EtcdServer;
  let pki: TestPki;
  const opened: ClusterStore[] = [];

  before(async () => {
    server = await EtcdServer.start({ tls: true, authTokenTtl: TTL_S });
    pki = server.pki as TestPki;
  });
  after(async () => {
    for (const s of opened) await s.close();
    await server?.cleanup();
  });

  function section(over: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      store: 'etcd',
      endpoints: [server.endpoint],
      prefix: '/podwire',
      tls: { ca: pki.ca, cert: pki.clientCert, key: pki.clientKey },
      ...over,
    };
  }

  async function open(
    over: Record<string, unknown> = {},
    extras: ClusterStoreExtras = {},
  ): Promise<ClusterStore> {
    const store = await openClusterStore(parseClusterStoreConfig(section(over)), {
      connect: server.connect,
      ...FAST,
      ...extras,
    });
    opened.push(store);
    return store;
  }

  const node = (name: string, n: number): NodeRecord => ({
    name,
    underlayIP: `192.0.2.${n}`,
    podCIDRs: [`10.244.${n}.0/24`],
  });

  test('trusted server, accepted client certificate: reads, writes and the watch work', async () => {
    const store = await open();
    assert.equal(store.health().ok, true, store.health().error);
    assert.match(store.description, /^etcd https:\/\/127\.0\.0\.1:2379 /);
    const log = new EventLog(store);
    try {
      assert.equal((await store.putNode(node('tls-a', 1), 'absent')).ok, true);
      assert.equal((await store.getNode('tls-a'))?.node.underlayIP, '192.0.2.1');
      await log.waitFor((events) => events.some((e) => e.type === 'put' && e.node.name === 'tls-a'));
    } finally {
      await log.stop();
    }
  });

  test('the certificate must name the endpoint: localhost (a DNS SAN) works, another name fails', async () => {
    // The socket goes to the server's 127.0.0.1 either way; only the name in the URL differs.
    const viaLoopback: ClusterStoreExtras = {
      connect: ({ port }) => server.connect({ host: '127.0.0.1', port }),
    };
    const ok = await open({ endpoints: ['https://localhost:2379'] }, viaLoopback);
    assert.equal(ok.health().ok, true, ok.health().error);
    await assert.rejects(
      open({ endpoints: ['https://etcd.invalid:2379'] }, viaLoopback),
      isCode(
        'ERR_STORE',
        /TLS: the server's certificate does not name etcd\.invalid \(ERR_TLS_CERT_ALTNAME_INVALID/,
      ),
    );
  });

  test('a server certificate from a CA not in cluster.tls.ca: the open fails saying so', async () => {
    await assert.rejects(
      open({ tls: { ca: pki.otherCa, cert: pki.clientCert, key: pki.clientKey } }),
      isCode(
        'ERR_STORE',
        /https:\/\/127\.0\.0\.1:2379.*TLS: the server's certificate is not signed by a CA in cluster\.tls\.ca/,
      ),
    );
  });

  test('no client certificate: etcd refuses the handshake, the open fails saying so', async () => {
    await assert.rejects(
      open({ tls: { ca: pki.ca } }),
      isCode(
        'ERR_STORE',
        /TLS: etcd refused the client certificate: cluster\.tls\.cert and cluster\.tls\.key/,
      ),
    );
  });

  test('a client certificate from another CA: refused the same way', async () => {
    await assert.rejects(
      open({ tls: { ca: pki.ca, cert: pki.otherClientCert, key: pki.otherClientKey } }),
      isCode('ERR_STORE', /TLS: etcd refused the client certificate/),
    );
  });

  test('unreadable or mismatched files: errors name the key', async () => {
    await assert.rejects(
      open({ tls: { ca: join(pki.dir, 'absent.crt'), cert: pki.clientCert, key: pki.clientKey } }),
      isCode('ERR_INVALID_CONFIG', /^cluster\.tls\.ca: cannot read .*absent\.crt: ENOENT/),
    );
    await assert.rejects(
      open({ tls: { ca: pki.ca, cert: pki.clientCert, key: pki.otherClientKey } }),
      isCode('ERR_INVALID_CONFIG', /^cluster\.tls: .*key values mismatch/),
    );
  });

  test('etcd down at open with a wrong CA: the store opens unhealthy, then its health names the TLS failure', async () => {
    await server.stop();
    let store: ClusterStore;
    try {
      store = await open({ tls: { ca: pki.otherCa, cert: pki.clientCert, key: pki.clientKey } });
      assert.equal(store.health().ok, false);
      assert.match(store.health().error ?? '', /unreachable: ECONNREFUSED/);
    } finally {
      await server.restart();
    }
    const deadline = Date.now() + 5000;
    while (!/not signed by a CA in cluster\.tls\.ca/.test(store.health().error ?? '')) {
      assert.ok(Date.now() < deadline, `health: ${JSON.stringify(store.health())}`);
      await sleep(100);
    }
    assert.equal(store.health().ok, false);
    await assert.rejects(store.getNode('tls-a'), isCode('ERR_STORE', /not signed by a CA/));
  });

  test('rotated files are picked up without a restart: a CA that does not sign etcd, then the right one again', async () => {
    const caFile = join(pki.dir, 'rotating-ca.crt');
    copyFileSync(pki.ca, caFile);
    const store = await open({ tls: { ca: caFile, cert: pki.clientCert, key: pki.clientKey } });
    assert.equal(store.health().ok, true, store.health().error);
    const until = async (what: string, pred: () => boolean): Promise<void> => {
      const deadline = Date.now() + 5000;
      while (!pred()) {
        assert.ok(Date.now() < deadline, `${what}: ${JSON.stringify(store.health())}`);
        await sleep(50);
      }
    };
    copyFileSync(pki.otherCa, caFile);
    await until('the new CA is used', () =>
      /not signed by a CA in cluster\.tls\.ca/.test(store.health().error ?? ''),
    );
    copyFileSync(pki.ca, caFile);
    await until('the right CA is back', () => store.health().ok);
    assert.equal((await store.getNode('tls-a'))?.node.name, 'tls-a');
  });

  describe('with etcd auth on', () => {
    const passwordFile = (name: string, text: string): string => {
      const path = join(pki.dir, `${name}.password`);
      writeFileSync(path, text, { mode: 0o600 });
      return path;
    };

    before(async () => {
      await server.enableAuth([
        { name: 'podwire', password: 'right-password', prefix: '/podwire' },
        { name: 'stranger', password: 'stranger-password' },
      ]);
    });

    test('no credentials: the open fails, naming cluster.auth', async () => {
      await assert.rejects(
        open(),
        isCode(
          'ERR_STORE',
          /(user name is empty|permission denied) \(etcd requires authentication: set cluster\.auth\)/,
        ),
      );
    });

    test('a wrong password: the open fails, naming the user and cluster.auth', async () => {
      const auth = { username: 'podwire', passwordFile: passwordFile('wrong', 'wrong-password\n') };
      await assert.rejects(
        open({ auth }),
        isCode(
          'ERR_STORE',
          /authentication failed, invalid user ID or password \(cluster\.auth: user "podwire"/,
        ),
      );
    });

    test('a client certificate with a Common Name: the open fails, saying how to issue one etcd accepts', async () => {
      const auth = { username: 'podwire', passwordFile: passwordFile('right', 'right-password') };
      await assert.rejects(
        open({ auth, tls: { ca: pki.ca, cert: pki.cnClientCert, key: pki.cnClientKey } }),
        isCode('ERR_STORE', /HTTP 400: CommonName of client .* issue cluster\.tls\.cert without a CN/),
      );
    });

    test('a user without permission on the prefix: the open fails saying so', async () => {
      const auth = { username: 'stranger', passwordFile: passwordFile('stranger', 'stranger-password') };
      await assert.rejects(
        open({ auth }),
        isCode('ERR_STORE', /permission denied \(the etcd user lacks read-write permission/),
      );
    });

    test('the right credentials serve; a token that expired is renewed', async () => {
      const auth = { username: 'podwire', passwordFile: passwordFile('right', 'right-password\n') };
      // No probe in between: the token expires unused.
      const store = await open({ auth }, { healthIntervalMs: 60_000 });
      assert.equal(store.health().ok, true, store.health().error);
      assert.equal((await store.putNode(node('auth-a', 2), 'absent')).ok, true);
      const log = new EventLog(store);
      try {
        await log.waitFor((events) => events.some((e) => e.node.name === 'auth-a'));
        await sleep((TTL_S + 1.5) * 1000);
        assert.equal((await store.getNode('auth-a'))?.node.underlayIP, '192.0.2.2');
        assert.equal((await store.putNode(node('auth-b', 3), 'absent')).ok, true);
        await log.waitFor((events) => events.some((e) => e.node.name === 'auth-b'));
      } finally {
        await log.stop();
      }
      assert.equal(store.health().ok, true, store.health().error);
    });

    test('etcd restarted (its tokens forgotten): calls and the watch authenticate again and carry on', async () => {
      const auth = { username: 'podwire', passwordFile: passwordFile('right', 'right-password\n') };
      const watcher = await open({ auth });
      const writer = await open({ auth });
      const log = new EventLog(watcher);
      try {
        await log.waitFor((events) => events.some((e) => e.node.name === 'auth-a'));
        await server.stop();
        await server.restart();
        // The watch reconnects with a token etcd no longer knows: canceled as unauthenticated, renewed.
        assert.equal((await writer.putNode(node('auth-c', 4), 'absent')).ok, true);
        await log.waitFor((events) => events.some((e) => e.node.name === 'auth-c'), 10_000);
      } finally {
        await log.stop();
      }
      assert.equal(watcher.health().ok, true, watcher.health().error);
    });

    test('TLS connections and the watch leave no descriptor behind once the store is closed', async () => {
      const auth = { username: 'podwire', passwordFile: passwordFile('right', 'right-password') };
      const fds = (): number => readdirSync('/proc/self/fd').length;
      const warm = await openClusterStore(parseClusterStoreConfig(section({ auth })), {
        connect: server.connect,
        ...FAST,
      });
      await warm.getNode('auth-a');
      await warm.close();
      // Settled first: descriptors of the earlier tests (a restarted server's, a closed store's) go a
      // few turns late under load; counted in `before` and gone later, they read as 2 fewer after.
      let before = fds();
      for (let settled = 0; settled < 4; ) {
        await sleep(100);
        const now = fds();
        settled = now === before ? settled + 1 : 0;
        before = now;
      }
      for (let i = 0; i < 3; i++) {
        const store = await openClusterStore(parseClusterStoreConfig(section({ auth })), {
          connect: server.connect,
          ...FAST,
        });
        const log = new EventLog(store);
        await Promise.all([store.getNode('auth-a'), store.listNodes(), store.getNode('auth-b')]);
        await log.waitFor((events) => events.length > 0);
        await log.stop();
        await store.close();
      }
      // A TLS socket's descriptor goes a few event-loop turns after close() (slower under load); a
      // leak stays past the deadline.
      const deadline = Date.now() + 3000;
      while (fds() > before && Date.now() < deadline) await sleep(50);
      assert.equal(fds(), before);
    });

    test('a missing password file: the error names cluster.auth.passwordFile', async () => {
      const auth = { username: 'podwire', passwordFile: join(pki.dir, 'absent.password') };
      await assert.rejects(
        open({ auth }),
        isCode('ERR_INVALID_CONFIG', /^cluster\.auth\.passwordFile: cannot read/),
      );
    });
  });
});
