/**
 * What a fault-injection test compares before and after an ADD: everything an ADD creates on a test
 * node, read from the kernel, the state directory, the agent (control socket), nftables and OVS.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { ipJson, run } from '../../../bed/exec.js';
import { linkNames } from '../../../bed/inspect.js';
import { controlSocketPath } from '../../../src/agent/ops/control-server.js';
import { callAgent } from '../../../src/cli/control-client.js';
import { flowKey, parseDump } from '../../../src/datapath/ovs/flow-text.js';
import type { FaultNode } from './fault-node.js';

/** Whether the pod reaches `to`: any of 3 one-second pings, sent from inside the pod's namespace. */
export async function reaches(pod: string, to: string): Promise<boolean> {
  for (let i = 0; i < 3; i++)
    if ((await run('ip', ['netns', 'exec', pod, 'ping', '-c', '1', '-W', '1', to])).code === 0) return true;
  return false;
}

export interface NodeState {
  nodeLinks: string[];
  bridgePorts: string[];
  podLinks: string[];
  claimFiles: string[];
  /** The node's records of pool addresses (stateDir/pool-ipam), one file per address. */
  poolRecords: string[];
  agentPods: unknown;
  agentIpamUsed: string[];
  nft: string;
  ovsPorts?: string[];
  ovsInterfaces?: string[];
  flows?: string[];
}

export async function stateOf(node: FaultNode, pod: string): Promise<NodeState> {
  const control = controlSocketPath(node.socket);
  const usage = (await callAgent(control, 'ipam')) as Array<{ used: string }>;
  const nft = await run('ip', ['netns', 'exec', node.nodeNs, 'nft', 'list', 'ruleset']);
  const state: NodeState = {
    nodeLinks: (await linkNames(node.nodeNs)).sort(),
    bridgePorts: (
      await ipJson<Array<{ ifname: string }>>(node.nodeNs, [
        'link',
        'show',
        'master',
        node.options.bridge,
      ]).catch(() => [])
    )
      .map((l) => l.ifname)
      .sort(),
    podLinks: (await linkNames(pod)).sort(),
    claimFiles: node.claims().map((c) => `${c.ip} ${c.containerId} ${c.ifname}`),
    poolRecords: filesUnder(join(node.dir, 'state', 'pool-ipam')),
    agentPods: await callAgent(control, 'pods'),
    agentIpamUsed: usage.map((u) => u.used),
    // Counters move with any traffic; the rules are what must not change.
    // Counters (inline and named) are statistics, not state a failed ADD could leave behind.
    nft: nft.stdout
      .replace(/counter packets \d+ bytes \d+/g, 'counter')
      .replace(/packets \d+ bytes \d+/g, 'packets - bytes -'),
  };
  const ovs = node.ovs;
  if (ovs) {
    const bridge = node.options.bridge;
    state.ovsPorts = (await ovs.vsctl('list-ports', bridge)).split('\n').filter((l) => l !== '');
    state.ovsInterfaces = (await ovs.vsctl('--bare', '--columns=name', 'list', 'Interface'))
      .split('\n')
      .filter((l) => l !== '')
      .sort();
    state.flows = parseDump(await ovs.ofctl('dump-flows', bridge))
      .map(flowKey)
      .sort();
  }
  return state;
}

/** Names of the files under `dir` (one level of sub-directories), records being written left out. */
function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const sub of readdirSync(dir, { withFileTypes: true })) {
    if (!sub.isDirectory() || sub.name.startsWith('.')) continue;
    for (const f of readdirSync(join(dir, sub.name))) if (!f.startsWith('.')) out.push(`${sub.name}/${f}`);
  }
  return out.sort();
}
