import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseClusterStoreConfig } from '../../src/cluster/config.js';
import { isCode } from './watch-log.js';

describe('cluster store configuration', () => {
  test('kubernetes section: kubeconfig and pools (IPPool objects, decision 48)', () => {
    assert.deepEqual(parseClusterStoreConfig({ store: 'kubernetes' }), { store: 'kubernetes' });
    assert.deepEqual(
      parseClusterStoreConfig({ store: 'kubernetes', kubeconfig: '/etc/podwire/kubeconfig', pools: true }),
      { store: 'kubernetes', kubeconfig: '/etc/podwire/kubeconfig', pools: true },
    );
    assert.deepEqual(parseClusterStoreConfig({ store: 'kubernetes', pools: false }), { store: 'kubernetes' });
    assert.throws(
      () => parseClusterStoreConfig({ store: 'kubernetes', pools: 'yes' }),
      isCode('ERR_INVALID_CONFIG', /cluster\.pools: must be true or false/),
    );
  });
  test('file and etcd sections', () => {
    assert.deepEqual(parseClusterStoreConfig({ store: 'file', path: '/etc/podwire/cluster.yaml' }), {
      store: 'file',
      path: '/etc/podwire/cluster.yaml',
    });
    assert.deepEqual(
      parseClusterStoreConfig({
        store: 'etcd',
        endpoints: ['http://10.0.0.1:2379', 'http://[fd00::1]:2379'],
        insecure: true,
      }),
      {
        store: 'etcd',
        endpoints: ['http://10.0.0.1:2379', 'http://[fd00::1]:2379'],
        prefix: '/podwire',
        insecure: true,
      },
    );
    assert.deepEqual(
      parseClusterStoreConfig({
        store: 'etcd',
        endpoints: ['https://10.0.0.1:2379', 'https://etcd-1.example:2379'],
        tls: {
          ca: '/etc/podwire/etcd/ca.crt',
          cert: '/etc/podwire/etcd/tls.crt',
          key: '/etc/podwire/etcd/tls.key',
        },
        auth: { username: 'podwire', passwordFile: '/etc/podwire/etcd/password' },
      }),
      {
        store: 'etcd',
        endpoints: ['https://10.0.0.1:2379', 'https://etcd-1.example:2379'],
        prefix: '/podwire',
        tls: {
          ca: '/etc/podwire/etcd/ca.crt',
          cert: '/etc/podwire/etcd/tls.crt',
          key: '/etc/podwire/etcd/tls.key',
        },
        auth: { username: 'podwire', passwordFile: '/etc/podwire/etcd/password' },
      },
    );
  });

  test('errors name the key', () => {
    const cases: [unknown, RegExp][] = [
      [null, /^cluster: must be a mapping/],
      [{ store: 'consul' }, /^cluster\.store: must be "file", "etcd" or "kubernetes"/],
      [{ store: 'file', path: 'rel.yaml' }, /^cluster\.path: must be an absolute path/],
      [{ store: 'file', path: '/x', endpoints: [] }, /^cluster\.endpoints: unknown key for store: file/],
      [{ store: 'etcd', endpoints: [] }, /^cluster\.endpoints: must be a non-empty list/],
      [
        { store: 'etcd', endpoints: ['https://a:1', 'ftp://b:2'] },
        /^cluster\.endpoints\[1\]: "ftp:\/\/b:2": must be https:\/\/HOST:PORT/,
      ],
      [
        { store: 'etcd', endpoints: ['https://a:1', 'http://b:2'] },
        /^cluster\.endpoints\[1\]: "http:\/\/b:2" is plain http: .* set cluster\.insecure: true/,
      ],
      [
        { store: 'etcd', endpoints: ['http://a:1'], insecure: 'yes' },
        /^cluster\.insecure: must be true or false/,
      ],
      [
        { store: 'etcd', endpoints: ['https://a:1'], prefix: 'podwire' },
        /^cluster\.prefix: must look like \/podwire/,
      ],
      [{ store: 'etcd', endpoints: ['https://a:1'], requestTimeoutMs: 5 }, /^cluster\.requestTimeoutMs: /],
      [
        { store: 'etcd', endpoints: ['https://a:1'], path: '/x' },
        /^cluster\.path: unknown key for store: etcd/,
      ],
      [
        { store: 'etcd', endpoints: ['http://a:1'], insecure: true, tls: { ca: '/ca' } },
        /^cluster\.tls: given, but no endpoint is https:\/\//,
      ],
      [
        { store: 'etcd', endpoints: ['https://a:1'], tls: { ca: 'ca.crt' } },
        /^cluster\.tls\.ca: must be an absolute path/,
      ],
      [
        { store: 'etcd', endpoints: ['https://a:1'], tls: { cert: '/c' } },
        /^cluster\.tls: cert and key go together/,
      ],
      [{ store: 'etcd', endpoints: ['https://a:1'], tls: { crt: '/c' } }, /^cluster\.tls\.crt: unknown key/],
      [
        { store: 'etcd', endpoints: ['https://a:1'], auth: { username: 'u', password: 'p' } },
        /^cluster\.auth\.password: unknown key/,
      ],
      [
        { store: 'etcd', endpoints: ['https://a:1'], auth: { username: '', passwordFile: '/p' } },
        /^cluster\.auth\.username: must be a non-empty string/,
      ],
      [
        { store: 'etcd', endpoints: ['https://a:1'], auth: { username: 'u' } },
        /^cluster\.auth\.passwordFile: must be an absolute path/,
      ],
    ];
    for (const [value, re] of cases) {
      assert.throws(() => parseClusterStoreConfig(value), isCode('ERR_INVALID_CONFIG', re), String(re));
    }
  });
});
