import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseClusterStoreConfig } from '../../src/cluster/config.js';
import { isCode } from './watch-log.js';

describe('cluster store configuration', () => {
  test('file and etcd sections', () => {
    assert.deepEqual(parseClusterStoreConfig({ store: 'file', path: '/etc/podwire/cluster.yaml' }), {
      store: 'file',
      path: '/etc/podwire/cluster.yaml',
    });
    assert.deepEqual(
      parseClusterStoreConfig({
        store: 'etcd',
        endpoints: ['http://10.0.0.1:2379', 'http://[fd00::1]:2379'],
      }),
      {
        store: 'etcd',
        endpoints: ['http://10.0.0.1:2379', 'http://[fd00::1]:2379'],
        prefix: '/podwire',
      },
    );
  });

  test('errors name the key', () => {
    const cases: [unknown, RegExp][] = [
      [null, /^cluster: must be a mapping/],
      [{ store: 'consul' }, /^cluster\.store: must be "file" or "etcd"/],
      [{ store: 'file', path: 'rel.yaml' }, /^cluster\.path: must be an absolute path/],
      [{ store: 'file', path: '/x', endpoints: [] }, /^cluster\.endpoints: unknown key for store: file/],
      [{ store: 'etcd', endpoints: [] }, /^cluster\.endpoints: must be a non-empty list/],
      [
        { store: 'etcd', endpoints: ['http://a:1', 'https://b:2'] },
        /^cluster\.endpoints\[1\]: "https:\/\/b:2"/,
      ],
      [
        { store: 'etcd', endpoints: ['http://a:1'], prefix: 'podwire' },
        /^cluster\.prefix: must look like \/podwire/,
      ],
      [{ store: 'etcd', endpoints: ['http://a:1'], requestTimeoutMs: 5 }, /^cluster\.requestTimeoutMs: /],
      [
        { store: 'etcd', endpoints: ['http://a:1'], path: '/x' },
        /^cluster\.path: unknown key for store: etcd/,
      ],
    ];
    for (const [value, re] of cases) {
      assert.throws(() => parseClusterStoreConfig(value), isCode('ERR_INVALID_CONFIG', re), String(re));
    }
  });
});
