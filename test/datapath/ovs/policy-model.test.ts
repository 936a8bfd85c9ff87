/**
 * The NetworkPolicy model test (test/datapath/policy-model.ts) on OVS: the grid's pods on a real
 * agent's OVS bridge (bed/ovs.ts's datapath type: userspace here), the policies through the OpenFlow
 * backend (decision 46). `npm test` runs a few cases; `npm run test:policy-model` runs 200
 * (PODWIRE_POLICY_MODEL_CASES, _SEED: see policy-model.ts).
 *
 * The backend is built as the agent's OVS datapath builds it: it flushes ovs-vswitchd's cached
 * datapath flows after each change through the control socket (decision 52). Without that flush, new
 * connections that match a cached flow keep the previous verdict for a while (decision 50), and this
 * test fails within its first cases (mutation `ovs-policy-no-cache-flush`).
 */
import assert from 'node:assert/strict';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { must } from '../../../bed/exec.js';
import { TestNode } from '../../../bed/node.js';
import { OVS_DATAPATH, ovsAvailable } from '../../../bed/ovs.js';
import { FlowTable } from '../../../src/datapath/ovs/openflow/flow-table.js';
import { defaultOpenflowTarget } from '../../../src/datapath/ovs/ovs-datapath.js';
import { OvsPolicyBackend } from '../../../src/datapath/ovs/policy-ovs-backend.js';
import { unixctl, vswitchdControlSocket } from '../../../src/datapath/ovs/unixctl.js';
import { reportOvsSkip } from '../ovs-skip.js';
import { MODEL_POD_CIDRS, modelRunParameters, PolicyModelGrid } from '../policy-model.js';
import { ovsOf } from './ovs-node.js';

reportOvsSkip('NetworkPolicy model');
describe(`NetworkPolicy model on OVS (${OVS_DATAPATH})`, { skip: !ovsAvailable() }, () => {
  const node = new TestNode({ datapath: 'ovs', podCIDRs: MODEL_POD_CIDRS });
  const grid = new PolicyModelGrid(node);
  let flows: FlowTable | undefined;
  let backend: OvsPolicyBackend | undefined;

  before(async () => {
    await node.setup();
    await grid.setup();
    const ovs = ovsOf(node);
    const ofport = Number((await ovs.vsctl('get', 'Interface', 'podwire-gw0', 'ofport')).trim());
    flows = new FlowTable(defaultOpenflowTarget(ovs.ovsdb, node.options.bridge));
    await flows.waitUp(5000);
    const control = vswitchdControlSocket(dirname(ovs.ovsdb.slice('unix:'.length)));
    backend = new OvsPolicyBackend(
      flows,
      { gatewayOfport: ofport, nodeIps: grid.nodeIps },
      {
        flushCache: async () => {
          await unixctl(control, 'revalidator/purge');
        },
      },
    );
    await backend.start();
  });

  after(async () => {
    await backend?.remove().catch(() => undefined);
    await flows?.close();
    await grid.stop();
    await node.cleanup();
  });

  test('random policies over the grid: the probed matrix is what the oracle says when apply() returns (TCP, UDP, IPv4, IPv6)', async (t) => {
    const { seed, cases } = modelRunParameters(20);
    const figures = await grid.run(t, backend as OvsPolicyBackend, seed, cases).catch(async (e) => {
      // The policy flows as the switch holds them, for the failure's reader.
      const held = await ovsOf(node).ofctl(
        'dump-flows',
        node.options.bridge,
        'cookie=0x0500000000000000/0xff00000000000000',
      );
      const cached = await must('ovs-appctl', [
        `--target=${join(ovsOf(node).dir, 'ovs-vswitchd.ctl')}`,
        'dpctl/dump-flows',
      ]);
      throw new Error(`${(e as Error).message}\npolicy flows:\n${held}\ndatapath flows:\n${cached}`);
    });
    assert.ok(figures.allowed > 0 && figures.denied > 0, JSON.stringify(figures));
  });
});
