/**
 * One node in bridging mode whose uplink (`up0`, with the node's address) is a veth into an "underlay"
 * namespace, where `wire0` is a host of the underlay's subnet: the bed of the tests of what crosses
 * the uplink. The caller cleans up the node, then the namespace set.
 */
import { must } from './exec.js';
import type { NamespaceSet } from './namespaces.js';
import { TestNode } from './node.js';
import { txChecksumOff } from './underlay.js';

export const BRIDGED_NODE_IP = '192.0.2.10';
export const UNDERLAY_HOST_IP = '192.0.2.20';

export interface BridgedNode {
  node: TestNode;
  /** The node's namespace: the agent, its bridge and the uplink `up0`. */
  nodeNs: string;
  /** The underlay host's namespace: `wire0`, at UNDERLAY_HOST_IP. */
  underlay: string;
}

export async function bridgedNode(
  spaces: NamespaceSet,
  role: string,
  datapath: 'linux-bridge' | 'ovs',
  podCIDRs: string[],
): Promise<BridgedNode> {
  const nodeNs = await spaces.add(`${role}node`);
  const underlay = await spaces.add(`${role}under`);
  await must('ip', [
    '-n',
    nodeNs,
    'link',
    'add',
    'up0',
    'type',
    'veth',
    'peer',
    'name',
    'wire0',
    'netns',
    underlay,
  ]);
  await must('ip', ['-n', nodeNs, 'addr', 'add', `${BRIDGED_NODE_IP}/24`, 'dev', 'up0']);
  await must('ip', ['-n', nodeNs, 'link', 'set', 'up0', 'up']);
  await must('ip', ['-n', underlay, 'addr', 'add', `${UNDERLAY_HOST_IP}/24`, 'dev', 'wire0']);
  await must('ip', ['-n', underlay, 'link', 'set', 'wire0', 'up']);
  await must('ip', ['-n', underlay, 'link', 'set', 'lo', 'up']);
  txChecksumOff(underlay, 'wire0'); // as a NIC: OVS's userspace datapath forwards what it reads as it is
  const node = new TestNode({ nodeNs, datapath, podCIDRs, config: { bridging: { uplink: 'up0' } } });
  await node.setup();
  return { node, nodeNs, underlay };
}
