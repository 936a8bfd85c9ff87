/**
 * The Linux bridge without its gateway ARP guard: where `nft` or the kernel's netdev egress hook is
 * missing (kernels before 5.16), the datapath still starts and carries pods, and warns once. The
 * guard itself is tested for real in compliance.ts; here `nft` is a seam that fails.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { NamespaceSet, netnsPath } from '../../bed/namespaces.js';
import { DatapathError } from '../../src/base/errors.js';
import { BridgeDatapath } from '../../src/datapath/linux-bridge/bridge-datapath.js';
import { Rtnetlink } from '../../src/kernel/netlink/rtnetlink.js';
import { inNetns, NetnsHandle } from '../../src/kernel/netns.js';
import type { Nft } from '../../src/kernel/nft.js';
import { writeSysctl } from '../../src/kernel/sysctl.js';

const spaces = new NamespaceSet();
const handles: NetnsHandle[] = [];
let nl: Rtnetlink | undefined;

before(async () => {
  const ns = await spaces.add('noguard');
  const home = NetnsHandle.current();
  const node = NetnsHandle.open(netnsPath(ns));
  handles.push(home, node);
  nl = inNetns(node, home, () => Rtnetlink.open());
});
after(async () => {
  nl?.close();
  for (const h of handles) h.close();
  await spaces.cleanup();
});

test('without nft (or the egress hook) the bridge starts with podGuards: off, works, and warns once for each guard', async () => {
  assert.ok(nl);
  const [home, node] = handles as [NetnsHandle, NetnsHandle];
  const failing: Nft = {
    apply: async () => {
      throw new DatapathError('nft exited 1: Error: Could not process rule: No such file');
    },
    run: async () => {
      throw new DatapathError('nft missing');
    },
  };
  const warnings: string[] = [];
  const dp = new BridgeDatapath({
    nl,
    sysctl: (k, v) => inNetns(node, home, () => writeSysctl(k, v)),
    nft: failing,
    warn: (msg) => warnings.push(msg),
    podGuards: false,
    bridge: 'pwtbr-ng',
    mtu: 1500,
    gateways: [{ family: 4, address: '10.252.0.1', prefixLength: 24 }],
  });
  await dp.start();
  assert.deepEqual(dp.status(), { ready: true });
  await dp.start();
  assert.equal(warnings.length, 2, warnings.join('; '));
  assert.match(warnings[0] ?? '', /gateway ARP guard not installed/);
  assert.match(warnings[1] ?? '', /pod guards are off/);
  assert.equal(dp.podGuards, 'off');
  assert.deepEqual(await dp.dropCounters(), [{ guard: 'GATEWAY_ARP_GUARD', packets: 0 }]);
  await dp.stop();
});

test('without what the pod guards need, the bridge refuses to start and names it (unless podGuards: off)', async () => {
  assert.ok(nl);
  const [home, node] = handles as [NetnsHandle, NetnsHandle];
  const failing: Nft = {
    apply: async () => {
      throw new DatapathError('nft exited 1: Error: Could not process rule: Operation not supported');
    },
    run: async () => '',
  };
  const dp = new BridgeDatapath({
    nl,
    sysctl: (k, v) => inNetns(node, home, () => writeSysctl(k, v)),
    nft: failing,
    bridge: 'pwtbr-ng2',
    mtu: 1500,
    gateways: [{ family: 4, address: '10.253.0.1', prefixLength: 24 }],
  });
  await assert.rejects(
    dp.start(),
    /pod guards cannot be installed: .*CONFIG_NF_TABLES_BRIDGE.*podGuards: off/,
  );
  assert.equal(dp.status().ready, false);
  await dp.stop();
});
