/**
 * The Bridge/Port/Interface helper against a real ovsdb-server and ovs-vswitchd (private, in a
 * throwaway namespace): bridge creation and adoption, a datapath-type mismatch, adding a port twice,
 * removing it twice, and the error of an interface ovs-vswitchd cannot open.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { must } from '../../../bed/exec.js';
import { NamespaceSet } from '../../../bed/namespaces.js';
import { OVS_DATAPATH, OvsInstance } from '../../../bed/ovs.js';
import { PodwireError } from '../../../src/base/errors.js';
import { OvsdbClient } from '../../../src/datapath/ovs/ovsdb-client.js';
import { VswitchDb } from '../../../src/datapath/ovs/vswitch-db.js';

const spaces = new NamespaceSet();
let ovs: OvsInstance;
let client: OvsdbClient;
let ns: string;

before(async () => {
  ns = await spaces.add('vsdb');
  ovs = await OvsInstance.start(ns);
  client = await OvsdbClient.connect(ovs.ovsdb);
});
after(async () => {
  await client?.close();
  await ovs?.stop();
  await spaces.cleanup();
});

test('ensureBridge creates the bridge once and adopts it after', async () => {
  const vs = new VswitchDb(client, 'pwtbr0');
  const settings = { datapathType: OVS_DATAPATH, protocols: ['OpenFlow13', 'OpenFlow15'] };
  const other = OVS_DATAPATH === 'netdev' ? 'system' : 'netdev';
  await vs.ensureBridge(settings);
  await vs.ensureBridge(settings);
  assert.equal((await ovs.vsctl('list-br')).trim(), 'pwtbr0');
  assert.equal((await ovs.vsctl('get', 'Bridge', 'pwtbr0', 'fail_mode')).trim(), 'secure');
  assert.equal((await ovs.vsctl('get', 'Bridge', 'pwtbr0', 'protocols')).trim(), '[OpenFlow13, OpenFlow15]');
  assert.deepEqual(
    (await vs.ports()).map((p) => p.name),
    ['pwtbr0'],
    'only the local port',
  );
  await assert.rejects(
    new VswitchDb(client, 'pwtbr0').ensureBridge({ ...settings, datapathType: other }),
    (e: unknown) =>
      e instanceof PodwireError &&
      e.message.includes(`datapath_type ${OVS_DATAPATH}, the agent config says ${other}`),
  );
});

test('a port added twice exists once; removed twice, the second time reports nothing to do', async () => {
  const vs = new VswitchDb(client, 'pwtbr0');
  await must('ip', ['-n', ns, 'link', 'add', 'pwtp0', 'type', 'veth', 'peer', 'name', 'pwtp0p']);
  await vs.addPort('pwtp0', { externalIds: { 'podwire-role': 'pod', k: 'first' } });
  await vs.addPort('pwtp0', { externalIds: { 'podwire-role': 'pod', k: 'second' } });
  const rows = (await vs.ports()).filter((p) => p.name === 'pwtp0');
  assert.equal(rows.length, 1);
  assert.equal(rows[0]?.externalIds.k, 'second');
  const row = await vs.waitOfport('pwtp0', 5000);
  assert.ok((row.ofport ?? 0) > 0);
  assert.equal(await vs.removePort('pwtp0'), true);
  assert.equal(await vs.removePort('pwtp0'), false);
  assert.equal(await vs.port('pwtp0'), undefined);
  assert.equal(
    (await ovs.vsctl('--columns=name', 'find', 'Interface', 'name=pwtp0')).trim(),
    '',
    'Interface row gone too',
  );
});

test('an interface ovs-vswitchd cannot open fails with its error', async () => {
  const vs = new VswitchDb(client, 'pwtbr0');
  await vs.addPort('pwt-nodev', { externalIds: {} });
  await assert.rejects(
    vs.waitOfport('pwt-nodev', 5000),
    (e: unknown) =>
      e instanceof PodwireError &&
      /could not add pwt-nodev to pwtbr0: .*(No such device|not found)/i.test(e.message),
  );
  await vs.removePort('pwt-nodev');
});

test('adding a port to a missing bridge fails and leaves no row behind', async () => {
  const vs = new VswitchDb(client, 'pwt-nobridge');
  await assert.rejects(vs.addPort('pwtp1', { externalIds: {} }), /bridge pwt-nobridge does not exist/);
  assert.equal((await ovs.vsctl('--columns=name', 'find', 'Port', 'name=pwtp1')).trim(), '');
});
