/**
 * The MAC of a pod interface, derived from its address: 0a:58 followed by the four bytes of the IPv4
 * address (for an IPv6-only pod, the last four bytes of its IPv6 address), the convention of
 * OVN-Kubernetes. A MAC that follows the address keeps neighbours' ARP and ND caches right when an
 * address is handed to a new pod, and lets anyone who knows a pod's address know its MAC.
 */
import { isIPv4 } from 'node:net';
import { ipToBytes } from './ip.js';
import { formatMac } from './mac.js';

export function podMac(ips: readonly string[]): string {
  const v4 = ips.find((ip) => isIPv4(ip));
  const tail = v4 !== undefined ? ipToBytes(v4, 4) : ipToBytes(ips[0] ?? '::', 6).subarray(12, 16);
  return formatMac(Buffer.concat([Buffer.of(0x0a, 0x58), tail]));
}
