/**
 * bed/cni-chain.ts builds each plugin's stdin as libcni's buildOneConfig and injectRuntimeConfig do:
 * the list's name and cniVersion injected, prevResult when there is one, and runtimeConfig holding
 * exactly the capability arguments of the capabilities the plugin declares as true.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CniChain, type ConfList, type RuntimeConf } from '../../bed/cni-chain.js';

const list: ConfList = {
  cniVersion: '1.0.0',
  name: 'net',
  plugins: [
    { type: 'podwire', socket: '/run/x.sock' },
    { type: 'portmap', capabilities: { portMappings: true, bandwidth: false }, snat: true },
    { type: 'bandwidth', capabilities: { bandwidth: true }, runtimeConfig: { static: 1 } },
    { type: 'tuning', runtimeConfig: { static: 2 } },
  ],
};
const chain = new CniChain(list, { pluginDirs: ['/nonexistent'], runtimeNetns: 'unused' });
const rt: RuntimeConf = {
  containerId: 'c1',
  netns: '/run/netns/x',
  ifname: 'eth0',
  capabilityArgs: {
    portMappings: [{ hostPort: 80, containerPort: 8080, protocol: 'tcp' }],
    bandwidth: { ingressRate: 1000, ingressBurst: 100 },
    ips: ['10.0.0.5/24'],
  },
};
const plugin = (i: number) => list.plugins[i] as ConfList['plugins'][number];

test('the list name and cniVersion are injected; prevResult only when there is one', () => {
  const first = chain.pluginConfig(plugin(0), rt, undefined);
  assert.deepEqual(first, { type: 'podwire', socket: '/run/x.sock', name: 'net', cniVersion: '1.0.0' });
  const prev = { cniVersion: '1.0.0', interfaces: [], ips: [] };
  assert.deepEqual(chain.pluginConfig(plugin(0), rt, prev).prevResult, prev);
});

test('runtimeConfig: the declared, enabled capabilities the runtime gave arguments for, and nothing else', () => {
  assert.deepEqual(chain.pluginConfig(plugin(1), rt, undefined).runtimeConfig, {
    portMappings: rt.capabilityArgs?.portMappings,
  });
  // Injected runtimeConfig replaces the plugin's own, as libcni's InjectConf does ...
  assert.deepEqual(chain.pluginConfig(plugin(2), rt, undefined).runtimeConfig, {
    bandwidth: rt.capabilityArgs?.bandwidth,
  });
  // ... and a plugin without capabilities keeps its own.
  assert.deepEqual(chain.pluginConfig(plugin(3), rt, undefined).runtimeConfig, { static: 2 });
  assert.equal(chain.pluginConfig(plugin(0), rt, undefined).runtimeConfig, undefined);
});

test('a plugin not found in CNI_PATH fails as libcni does, naming the path', async () => {
  await assert.rejects(chain.add(rt), /failed to find plugin "podwire" in path \[\/nonexistent\]/);
});
