/**
 * ADD rollback of a pool pod under injected faults: the node is a cluster member with a real etcd
 * (on a test underlay), and the pod asks for a fixed address of an IP pool (CNI_ARGS PODWIRE_POOL,
 * IP). Each store call of the pool allocation (the cluster's pool store, the node's pool record) and
 * the datapath attach fail in turn, before or after taking effect. After each failure nothing is
 * held: no claim in etcd, no record under stateDir/pool-ipam, no veth, port, flow or guard; and the
 * next ADD of the same pod, asking for the same address, gets it. Linux bridge, and OVS (userspace)
 * when ovs-vswitchd is installed.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { EtcdServer } from '../../bed/etcd.js';
import { ipJson } from '../../bed/exec.js';
import { settledHostVeths } from '../../bed/inspect.js';
import { resultIps } from '../../bed/node.js';
import { ovsAvailable } from '../../bed/ovs.js';
import { Underlay } from '../../bed/underlay.js';
import { EtcdStore } from '../../src/cluster/etcd-store.js';
import { reportOvsSkip } from '../datapath/ovs-skip.js';
import { FaultNode } from './fault/fault-node.js';
import { type Fault, INJECTED } from './fault/fault-plan.js';
import { type NodeState, stateOf } from './fault/node-state.js';

const POOL = {
  name: 'faulty',
  ranges: ['172.30.0.200-172.30.0.203'],
  subnet: { gateway: '172.30.0.254', prefixLength: 24 },
  vlan: 0,
};
const FIXED = '172.30.0.202';

/** Every store call of a fixed-address pool allocation, in order, then the datapath's attach. */
const FAULTS: Array<Omit<Fault, 'id'>> = [
  { op: 'pools.getPool', nth: 1, when: 'before' },
  { op: 'pools.claim', nth: 1, when: 'before' },
  { op: 'pools.claim', nth: 1, when: 'after' },
  { op: 'pool-ipam.claim', nth: 1, when: 'before' },
  { op: 'pool-ipam.claim', nth: 1, when: 'after' },
  { op: 'datapath.attachPort', nth: 1, when: 'before' },
  { op: 'datapath.attachPort', nth: 1, when: 'after' },
];

type State = NodeState & { etcdClaims: string[] };

const datapaths: Array<'linux-bridge' | 'ovs'> = [
  'linux-bridge',
  ...(ovsAvailable() ? ['ovs' as const] : []),
];

reportOvsSkip('pool ADD rollback');
for (const datapath of datapaths) {
  describe(`pool pod ADD rollback with injected faults (${datapath})`, () => {
    const underlay = new Underlay();
    let etcd: EtcdServer | undefined;
    let store: EtcdStore | undefined;
    let node: FaultNode | undefined;
    let pod = '';
    let baseline: State;

    /** The node's state plus the pool's claims in etcd. */
    async function stateNow(n: FaultNode): Promise<State> {
      const claims = (await store?.pools.claims(POOL.name)) ?? [];
      return {
        ...(await stateOf(n, pod)),
        etcdClaims: claims.map((c) => `${c.ip} ${c.owner.node} ${c.owner.containerId}`),
      };
    }

    before(async () => {
      await underlay.setup();
      const un = await underlay.addNode('n0');
      etcd = await EtcdServer.start({ netns: underlay.ns, host: underlay.hostIp });
      store = await EtcdStore.open({ endpoints: [etcd.endpoint], connect: etcd.connect, prefix: '/podwire' });
      assert.equal(await store.pools.createPool(POOL), true);
      node = new FaultNode({
        nodeNs: un.ns,
        datapath,
        config: {
          podCIDRs: null,
          cluster: {
            store: 'etcd',
            endpoints: [etcd.endpoint],
            prefix: '/podwire',
            requestTimeoutMs: 8000,
            insecure: true,
          },
          nodeName: 'node-0',
          uplink: un.uplink,
          trafficMode: 'noEncap',
          clusterCIDRs: ['10.250.0.0/16'],
          nodeCIDRMaskSize: { ipv4: 24 },
        },
      });
      await node.setup();
      pod = await node.addPod('poolrb');
      baseline = await stateNow(node);
      assert.deepEqual(baseline.etcdClaims, []);
    });
    after(async () => {
      await store?.close();
      await node?.cleanup();
      await etcd?.cleanup();
      await underlay.cleanup();
    });

    const call = {
      containerId: `pool-rollback-${datapath}`,
      ifname: 'eth0',
      env: { CNI_ARGS: `K8S_POD_NAMESPACE=web;K8S_POD_NAME=rb;PODWIRE_POOL=${POOL.name};IP=${FIXED}` },
    };
    let seq = 0;
    for (const f of FAULTS) {
      test(`${f.op} fails ${f.when}: CNI error, nothing held, the next ADD gets ${FIXED}`, async () => {
        const n = node as FaultNode;
        seq += 1;
        n.setFault({ id: `${datapath}-pool-${seq}`, ...f });
        const failed = await n.cni({ command: 'ADD', netns: pod, ...call });
        n.setFault(undefined);
        assert.equal(failed.code, 1, `ADD must fail: ${failed.stdout}`);
        const err = failed.json as { code: number; msg: string };
        assert.equal(err.code, f.op.startsWith('datapath.') ? 106 : 107, failed.stdout);
        assert.match(err.msg, new RegExp(`${INJECTED}: ${f.op.replace('.', '\\.')} \\(`));
        await settledHostVeths(n.nodeNs, 0);
        assert.deepEqual(await stateNow(n), baseline, 'the node and etcd after the failed ADD');

        const ok = await n.cni({ command: 'ADD', netns: pod, ...call });
        assert.equal(ok.code, 0, `the next ADD of the same pod: ${ok.stdout}`);
        assert.deepEqual(resultIps(ok), [FIXED]);
        const addrs = await ipJson<Array<{ addr_info: Array<{ local: string }> }>>(pod, [
          'addr',
          'show',
          'eth0',
        ]);
        assert.ok(
          addrs[0]?.addr_info.some((a) => a.local === FIXED),
          'the pod holds its address',
        );
        const held = await stateNow(n);
        assert.deepEqual(held.etcdClaims, [`${FIXED} node-0 ${call.containerId}`]);
        assert.equal(held.poolRecords.length, 1, 'the node records its pool address');
        const del = await n.cni({ command: 'DEL', netns: pod, ...call });
        assert.equal(del.code, 0, del.stdout);
        await settledHostVeths(n.nodeNs, 0);
        assert.deepEqual(await stateNow(n), baseline, 'the node and etcd after DEL');
      });
    }
  });
}
