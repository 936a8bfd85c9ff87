/**
 * The node's pod CIDRs, as the datapaths know them (from the gateway addresses: each gateway is the
 * first address of its pod CIDR), and what they tell about a pod: a pod whose addresses all lie
 * outside them drew them from an IP pool, so they are the underlay's and, in bridging mode, its frames
 * belong on the underlay's L2. Every other pod (a plain pod) is node-local: the node routes its
 * traffic, and neither its frames nor the underlay's ever cross the uplink to or from it.
 */
import { type Prefix, parseIp, parseIpOrThrow, prefixContainsIp, prefixOf } from '../base/ip.js';
import type { GatewayAddress } from './datapath.js';

/** The prefix of each gateway address (the address with its host bits cleared). */
export function podCidrs(gateways: readonly GatewayAddress[]): Prefix[] {
  return gateways.map((g) => prefixOf(parseIpOrThrow(g.address), g.prefixLength));
}

/** The node's IPv4 pod CIDRs as text. */
export function podCidrsV4(gateways: readonly GatewayAddress[]): string[] {
  return podCidrs(gateways)
    .filter((p) => p.family === 4)
    .map((p) => p.text);
}

/** The node's IPv6 pod CIDRs as (network, prefix length). */
export function podCidrsV6(gateways: readonly GatewayAddress[]): Array<{ network: bigint; length: number }> {
  return podCidrs(gateways)
    .filter((p) => p.family === 6)
    .map((p) => ({ network: p.network, length: p.length }));
}

/**
 * Whether a pod with these addresses is an underlay (pool) pod: it has addresses and none lies in a
 * pod CIDR of the node. Any doubt is node-local: a pod without addresses, and a pod with one address
 * in a pod CIDR, whatever its others are (a dual-stack pod whose node has since dropped its IPv6 pod
 * CIDR is still a plain pod).
 */
export function onUnderlay(ips: readonly string[], cidrs: readonly Prefix[]): boolean {
  return (
    ips.length > 0 &&
    ips.every((text) => {
      const ip = parseIp(text);
      return ip !== undefined && !cidrs.some((c) => prefixContainsIp(c, ip));
    })
  );
}
