/**
 * The NetworkPolicy model test (test/datapath/policy-model.ts) on the Linux bridge: the grid's pods on
 * a real agent's bridge, the policies through the nftables backend (decision 45) in the node's
 * namespace, judged by br_netfilter's forward hook. `npm test` runs a few cases;
 * `npm run test:policy-model` runs 200 (PODWIRE_POLICY_MODEL_CASES, _SEED: see policy-model.ts).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { netnsPath } from '../../bed/namespaces.js';
import { TestNode } from '../../bed/node.js';
import { NftPolicyBackend } from '../../src/datapath/linux-bridge/nft-policy-backend.js';
import { NfTables } from '../../src/kernel/netlink/nf-tables.js';
import { inNetns, NetnsHandle } from '../../src/kernel/netns.js';
import { nftIn } from '../../src/kernel/nft.js';
import { MODEL_POD_CIDRS, modelRunParameters, PolicyModelGrid } from './policy-model.js';

describe('NetworkPolicy model on the Linux bridge (nftables)', () => {
  const node = new TestNode({ podCIDRs: MODEL_POD_CIDRS });
  const grid = new PolicyModelGrid(node);
  const handles: NetnsHandle[] = [];
  let nf: NfTables | undefined;
  let backend: NftPolicyBackend | undefined;

  before(async () => {
    await node.setup();
    await grid.setup();
    const home = NetnsHandle.current();
    const n = NetnsHandle.open(netnsPath(node.nodeNs));
    handles.push(home, n);
    nf = inNetns(n, home, () => NfTables.open());
    backend = new NftPolicyBackend(nftIn(node.nodeNs), nf);
    await backend.start();
  });

  after(async () => {
    await backend?.remove().catch(() => undefined);
    nf?.close();
    for (const h of handles) h.close();
    await grid.stop();
    await node.cleanup();
  });

  test('random policies over the grid: the probed matrix is what the oracle says (TCP, UDP, IPv4, IPv6)', async (t) => {
    const { seed, cases } = modelRunParameters(20);
    const figures = await grid.run(t, backend as NftPolicyBackend, seed, cases);
    assert.ok(figures.allowed > 0 && figures.denied > 0, JSON.stringify(figures));
  });
});
