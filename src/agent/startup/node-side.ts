/**
 * The node side of the agent once the pod CIDRs and the MTU are known: the datapath, and in
 * bridging mode the uplink moved into it (or, without bridging, an uplink a killed run left moved
 * put back). Starts before the overlay, which sends through what this returns.
 */
import { formatIp } from '../../base/ip.js';
import type { Datapath, GatewayAddress } from '../../datapath/datapath.js';
import { parseCidr } from '../../ipam/cidr.js';
import type { Rtnetlink } from '../../kernel/netlink/rtnetlink.js';
import { nftIn } from '../../kernel/nft.js';
import { writeSysctl } from '../../kernel/sysctl.js';
import type { AgentConfig } from '../config.js';
import type { Logger } from '../log.js';
import type { UndoStack } from '../undo-stack.js';
import { enableBridgeNetfilter } from './bridge-netfilter.js';
import { UplinkBridging } from './bridging.js';
import { createDatapath, gatewayInterface } from './datapath-select.js';
import { installHostVethInput } from './host-veth-input.js';

/** The gateway address of each pod CIDR: its first host. */
export function gatewaysOf(podCIDRs: string[]): GatewayAddress[] {
  return podCIDRs.map((text) => {
    const c = parseCidr(text);
    return { family: c.family, address: formatIp(c.family, c.gateway), prefixLength: c.prefixLength };
  });
}

export interface NodeSide {
  datapath: Datapath;
  /** In bridging mode, the interface that took over the uplink's addresses (the underlay IP). */
  underlayIndex: number | undefined;
}

export async function startNodeSide(
  config: AgentConfig,
  nl: Rtnetlink,
  log: Logger,
  undo: UndoStack,
  /** A test seam (AgentSeams.wrapDatapath). */
  wrap?: (datapath: Datapath) => Datapath,
): Promise<NodeSide> {
  // Before the first pod: kube-proxy's Services need the bridge's frames in the node's conntrack.
  if (config.datapath === 'linux-bridge') enableBridgeNetfilter(writeSysctl, log);
  // Before the first pod: nothing reaches the node's stack on a host veth itself.
  await installHostVethInput(nftIn(), nl, (message, fields) => log.warn(message, fields));
  const made = createDatapath(config, nl, gatewaysOf(config.podCIDRs), log);
  const datapath = wrap ? wrap(made) : made;
  await datapath.start();
  undo.push('datapath', () => datapath.stop());
  const common = { nl, target: gatewayInterface(config), datapath, stateDir: config.stateDir, log };
  if (!config.bridging) {
    await UplinkBridging.restoreLeftover(common);
    return { datapath, underlayIndex: undefined };
  }
  const { bridging, index } = await UplinkBridging.attach({ ...common, settings: config.bridging });
  undo.push('uplink bridging', () => bridging.restore());
  return { datapath, underlayIndex: index };
}
