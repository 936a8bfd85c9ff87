/** Builds the datapath the agent configuration names (`datapath: linux-bridge | ovs`). */
import type { Datapath, GatewayAddress } from '../../datapath/datapath.js';
import { BridgeDatapath } from '../../datapath/linux-bridge/bridge-datapath.js';
import { OvsDatapath } from '../../datapath/ovs/ovs-datapath.js';
import type { Rtnetlink } from '../../kernel/netlink/rtnetlink.js';
import { nftIn } from '../../kernel/nft.js';
import { writeSysctl } from '../../kernel/sysctl.js';
import type { AgentConfig } from '../config.js';
import type { Logger } from '../log.js';

/** `nl` is the agent's node-namespace netlink socket; the datapath borrows it, the agent closes it. */
export function createDatapath(
  config: AgentConfig,
  nl: Rtnetlink,
  gateways: GatewayAddress[],
  log?: Logger,
): Datapath {
  const common = {
    nl,
    bridge: config.bridge,
    mtu: config.mtu,
    gateways,
    sysctl: writeSysctl,
    nft: nftIn(),
  };
  switch (config.datapath) {
    case 'linux-bridge':
      return new BridgeDatapath({
        ...common,
        ...(log ? { warn: (msg, fields) => log.warn(msg, fields) } : {}),
        podGuards: config.podGuards !== 'off',
      });
    case 'ovs':
      return new OvsDatapath({
        ...common,
        gateway: config.gateway,
        ovsdb: config.ovsdb,
        datapathType: config.ovsDatapathType,
        ...(config.ovsUnixctl ? { unixctl: config.ovsUnixctl } : {}),
        // NetworkPolicy is enforced with the Kubernetes store (startup/policy-start.ts).
        policy: config.cluster?.store.store === 'kubernetes',
        ...(log
          ? { warn: (msg, fields) => log.warn(msg, fields), info: (msg, fields) => log.info(msg, fields) }
          : {}),
      });
  }
}

/** The interface that holds the gateway addresses: the Linux bridge itself, or the OVS internal port. */
export function gatewayInterface(config: AgentConfig): string {
  return config.datapath === 'ovs' ? config.gateway : config.bridge;
}
