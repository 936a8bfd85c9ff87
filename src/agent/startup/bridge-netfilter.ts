/**
 * The Linux bridge's netfilter settings kube-proxy needs (decision 19): with
 * `net.bridge.bridge-nf-call-iptables` (and `…ip6tables`) at 1, frames the bridge forwards between two
 * pods pass the node's iptables/nftables hooks and its conntrack. kube-proxy DNATs a pod's connection
 * to a Service in the node's prerouting hook; the backend's reply, when the backend is on the same
 * bridge, goes pod to pod on L2 and is un-NATed only if the bridge hands it to conntrack. At 0 the
 * client sees the backend's address, not the Service's, and drops the reply. The settings are per
 * network namespace on kernels since 5.3 and exist only while `br_netfilter` is loaded.
 */
import { existsSync } from 'node:fs';
import type { SysctlWriter } from '../../kernel/sysctl.js';
import type { Logger } from '../log.js';

export const BRIDGE_NF_SYSCTLS = [
  'net/bridge/bridge-nf-call-iptables',
  'net/bridge/bridge-nf-call-ip6tables',
];

/**
 * Equivalent to: `sysctl -w net.bridge.bridge-nf-call-iptables=1 net.bridge.bridge-nf-call-ip6tables=1`
 * in the agent's namespace. Without `br_netfilter` there is nothing to set: Services then work only
 * across nodes, and the agent says so.
 */
export function enableBridgeNetfilter(sysctl: SysctlWriter, log: Logger): void {
  if (!existsSync('/proc/sys/net/bridge')) {
    log.warn(
      'br_netfilter is not loaded: Services (kube-proxy) will not work between pods of this node; load it (modprobe br_netfilter)',
    );
    return;
  }
  for (const key of BRIDGE_NF_SYSCTLS) sysctl(key, '1');
}
