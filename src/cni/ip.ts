/**
 * Address syntax checks for result and config fields. Stricter than `net.isIP` in one way: zone
 * indices (`fe80::1%eth0`) are refused, as Go's net.ParseIP refuses them, because libcni-based
 * runtimes would reject a result that carries one.
 */

import { isIP } from 'node:net';

export type IpFamily = 4 | 6;

/** The family of a plain address, or undefined when it is not one. */
export function ipFamily(address: string): IpFamily | undefined {
  if (address.includes('%')) return undefined;
  const family = isIP(address);
  return family === 4 || family === 6 ? family : undefined;
}

/** The family of `address/prefix` (prefix within the family's width), or undefined when malformed. */
export function cidrFamily(cidr: string): IpFamily | undefined {
  const slash = cidr.indexOf('/');
  if (slash < 0) return undefined;
  const family = ipFamily(cidr.slice(0, slash));
  if (family === undefined) return undefined;
  const prefix = cidr.slice(slash + 1);
  if (!/^(0|[1-9]\d{0,2})$/.test(prefix)) return undefined;
  return Number(prefix) <= (family === 4 ? 32 : 128) ? family : undefined;
}
