/**
 * Where an OVS pod attach spends its time, step by step, on a private OVS (userspace datapath) in a
 * throwaway namespace: the OVSDB insert, the wait for ovs-vswitchd's OpenFlow port, and the pod's
 * flows over the OpenFlow connection. `node dist/bench/ovs-steps.js [pods]`.
 */
import { must } from '../bed/exec.js';
import { NamespaceSet } from '../bed/namespaces.js';
import { OvsInstance } from '../bed/ovs.js';
import { FlowTable } from '../src/datapath/ovs/openflow/flow-table.js';
import { OvsdbClient } from '../src/datapath/ovs/ovsdb-client.js';
import { pipelineFlows, podCookie, podFlows } from '../src/datapath/ovs/pipeline.js';
import { VswitchDb } from '../src/datapath/ovs/vswitch-db.js';

const pods = Number(process.argv[2] ?? 30);
const namespaces = new NamespaceSet();
const ns = await namespaces.add('ovsst');
const ovs = await OvsInstance.start(ns);
const client = await OvsdbClient.connect(ovs.ovsdb);
const flows = new FlowTable(ovs.target('br0'));
try {
  const vs = new VswitchDb(client, 'br0');
  await vs.ensureBridge({ datapathType: 'netdev', protocols: ['OpenFlow10', 'OpenFlow13', 'OpenFlow14'] });
  await flows.waitUp(5000);
  await flows.replace(pipelineFlows({ ofport: 1, mac: '02:00:00:00:00:01', ipv4s: ['10.0.0.1'] }));
  const t = { insert: [] as number[], wait: [] as number[], flows: [] as number[] };
  for (let i = 0; i < pods; i++) {
    const name = `pv${i}`;
    await must('ip', ['-n', ns, 'link', 'add', name, 'type', 'veth', 'peer', 'name', `pp${i}`]);
    const t0 = performance.now();
    await vs.addPort(name, { externalIds: { x: 'y' } });
    const t1 = performance.now();
    const row = await vs.waitOfport(name, 5000);
    const t2 = performance.now();
    const cookie = podCookie(name);
    await flows.apply({
      deleteCookies: [cookie],
      add: podFlows({
        ofport: row.ofport as number,
        mac: '02:00:00:00:01:02',
        ips: ['10.0.0.5', 'fd00::5'],
        cookie,
      }),
      atomic: process.env.ATOMIC === '1',
    });
    const t3 = performance.now();
    t.insert.push(t1 - t0);
    t.wait.push(t2 - t1);
    t.flows.push(t3 - t2);
  }
  const med = (a: number[]) => a.sort((x, y) => x - y)[Math.floor(a.length / 2)]?.toFixed(2);
  console.log(
    `median ms over ${pods}: insert ${med(t.insert)}, wait ofport ${med(t.wait)}, flows ${med(t.flows)}`,
  );
} finally {
  await flows.close();
  client.destroy();
  await ovs.stop();
  await namespaces.cleanup();
}
