/**
 * The node agent with fault-injecting seams, run by FaultNode inside a test node namespace:
 *   node FLAGS dist/test/agent/fault/fault-agent.js CONFIG FAULT_FILE
 * Same start and stop as `podwire agent`, with the datapath, the IPAM stores (ops "store.*" for the
 * node's CIDRs, "pool-ipam.*" for its pool records) and the pool store ("pools.*") wrapped.
 */
import { Agent } from '../../../src/agent/agent.js';
import { loadAgentConfig } from '../../../src/agent/config.js';
import { jsonLogger } from '../../../src/agent/log.js';
import { FaultyPoolStore } from '../../cluster/faulty-pool-store.js';
import { FaultyDatapath } from '../../datapath/faulty-datapath.js';
import { FaultyIpamStore } from '../../ipam/faulty-store.js';
import { FaultPlan } from './fault-plan.js';

const [config, faults] = process.argv.slice(2);
if (config === undefined || faults === undefined) {
  process.stderr.write('usage: fault-agent.js CONFIG FAULT_FILE\n');
  process.exit(2);
}
const log = jsonLogger();
const plan = new FaultPlan(faults);
const agent = await Agent.start(loadAgentConfig(config), log, {
  wrapDatapath: (dp) => new FaultyDatapath(dp, plan),
  wrapIpamStore: (store, which) => new FaultyIpamStore(store, plan, which === 'node' ? 'store' : 'pool-ipam'),
  wrapPoolStore: (pools) => new FaultyPoolStore(pools, plan),
});
const stop = () => {
  agent.stop().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
