/** The Datapath compliance suite against OVS (userspace datapath), with a private OVS in the node namespace. */

import { OvsInstance } from '../../bed/ovs.js';
import { OvsDatapath } from '../../src/datapath/ovs/ovs-datapath.js';
import { datapathCompliance } from './compliance.js';

let ovs: OvsInstance | undefined;

datapathCompliance(
  'ovs (netdev)',
  'pwtgw0',
  (env) => {
    if (!ovs) throw new Error('OVS not started');
    return new OvsDatapath({
      ...env,
      bridge: 'pwtbr-ovs',
      gateway: 'pwtgw0',
      mtu: 1500,
      ovsdb: ovs.ovsdb,
      datapathType: 'netdev',
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
