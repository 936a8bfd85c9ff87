/**
 * Issue 15, finding 4: a Kubernetes namespace may be named `constructor` (or `__proto__`); the pool
 * lookup by namespace read a plain object, so such a namespace found Object.prototype's members and
 * every pool ADD from it failed. Depends on `poolByNamespace` being a Map
 * (src/agent/cluster-config.ts, src/agent/cni/pool-select.ts `poolByNamespace.get(ns)`).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { poolRequest } from '../../../src/agent/cni/pool-select.js';
import { parseAgentConfig } from '../../../src/agent/config.js';
import { parseNetConf } from '../../../src/cni/config.js';

const conf = parseNetConf(JSON.stringify({ cniVersion: '1.1.0', name: 'podwire', type: 'podwire' }), 'ADD');

function agentConfig(poolByNamespace: string): ReturnType<typeof parseAgentConfig> {
  return parseAgentConfig(`
cluster: {store: etcd, endpoints: ["http://127.0.0.1:2379"], insecure: true}
clusterCIDRs: [10.244.0.0/16]
nodeCIDRMaskSize: {ipv4: 24}
nodeName: node-a
uplink: eth0
poolByNamespace: ${poolByNamespace}
`);
}

test('finding 4: a namespace named constructor or __proto__ has no pool unless mapped', () => {
  const config = agentConfig('{web: blue}');
  for (const ns of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
    const args = new Map([['K8S_POD_NAMESPACE', ns]]);
    assert.equal(poolRequest(args, conf, config), undefined, ns);
  }
  assert.equal(poolRequest(new Map([['K8S_POD_NAMESPACE', 'web']]), conf, config)?.pool, 'blue');
});

test('finding 4: a namespace named constructor can be mapped to a pool', () => {
  const config = agentConfig('{constructor: blue}');
  const req = poolRequest(new Map([['K8S_POD_NAMESPACE', 'constructor']]), conf, config);
  assert.equal(req?.pool, 'blue');
  assert.equal(req?.poolSource, 'agent config poolByNamespace.constructor');
});
