/** NetworkPolicy through two real agents on the linux-bridge datapath: test/multinode/kube-policy.ts. */
import { policyThroughAgent } from './kube-policy.js';

policyThroughAgent('linux-bridge');
