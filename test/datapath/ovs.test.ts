/**
 * The Datapath compliance suite against OVS, with a private OVS in the node namespace, on the datapath
 * type of bed/ovs.ts's OVS_DATAPATH (userspace here; the kernel module in `npm run test:vm`).
 */

import { OVS_DATAPATH, OvsInstance } from '../../bed/ovs.js';
import { OvsDatapath } from '../../src/datapath/ovs/ovs-datapath.js';
import { datapathCompliance } from './compliance.js';

let ovs: OvsInstance | undefined;

datapathCompliance(
  `ovs (${OVS_DATAPATH})`,
  'pwtgw0',
  (env) => {
    if (!ovs) throw new Error('OVS not started');
    return new OvsDatapath({
      ...env,
      bridge: 'pwtbr-ovs',
      gateway: 'pwtgw0',
      mtu: 1500,
      ovsdb: ovs.ovsdb,
      datapathType: OVS_DATAPATH,
    });
  },
  {
    before: async (env) => {
      ovs = await OvsInstance.start(env.nodeNs);
    },
    after: async () => {
      await ovs?.stop();
    },
  },
);
