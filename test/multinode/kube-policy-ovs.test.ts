/** NetworkPolicy through two real agents on the ovs datapath: test/multinode/kube-policy.ts. */
import { policyThroughAgent } from './kube-policy.js';

policyThroughAgent('ovs');
