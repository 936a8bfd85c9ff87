/**
 * A pod CIDR: an IPv4 or IPv6 prefix with BigInt arithmetic.
 *
 * Address roles inside a range (all values are absolute addresses):
 *   network     = the prefix itself, never assigned
 *   gateway     = network + 1 = firstHost, the node's gateway interface, never assigned to a pod
 *   broadcast   = the last address, IPv4 only, never assigned
 *   lastHost    = broadcast - 1 (IPv4), the last address (IPv6)
 *   assignable  = [gateway + 1, lastHost]: what pods receive
 * A range is accepted only if it has at least one assignable address (see `parseCidr`).
 */

import { InvalidConfigError } from '../base/errors.js';
import { addressBits, formatIp, type IpFamily, parseIp, parsePrefixOrThrow } from '../base/ip.js';

export class Cidr {
  readonly family: IpFamily;
  /** The network address (host bits all zero). */
  readonly network: bigint;
  readonly prefixLength: number;
  /** Canonical "network/prefix" text; it is also the range id the allocator stores under. */
  readonly text: string;
  /** First usable host (network + 1); podwire uses it as the gateway. */
  readonly firstHost: bigint;
  /** Last usable host: broadcast - 1 for IPv4, the last address for IPv6. */
  readonly lastHost: bigint;
  /** The IPv4 broadcast address; undefined for IPv6. */
  readonly broadcast: bigint | undefined;
  /** First address handed to pods (gateway + 1). */
  readonly firstAssignable: bigint;
  /** How many addresses pods can receive: lastHost - firstAssignable + 1, always >= 1. */
  readonly assignableCount: bigint;

  /** Use `parseCidr`; the constructor trusts its arguments. */
  constructor(family: IpFamily, network: bigint, prefixLength: number) {
    const hostBits = BigInt(addressBits(family) - prefixLength);
    const last = network + (1n << hostBits) - 1n;
    this.family = family;
    this.network = network;
    this.prefixLength = prefixLength;
    this.text = `${formatIp(family, network)}/${prefixLength}`;
    this.firstHost = network + 1n;
    this.broadcast = family === 4 ? last : undefined;
    this.lastHost = family === 4 ? last - 1n : last;
    this.firstAssignable = this.firstHost + 1n;
    this.assignableCount = this.lastHost - this.firstAssignable + 1n;
  }

  /** Total number of addresses in the prefix. */
  get size(): bigint {
    return 1n << BigInt(addressBits(this.family) - this.prefixLength);
  }

  /** The gateway address (= first usable host). */
  get gateway(): bigint {
    return this.firstHost;
  }

  /** Canonical text of an address value of this family. */
  format(value: bigint): string {
    return formatIp(this.family, value);
  }

  /** Whether `ip` (text of either family) lies inside the prefix. Addresses of the other family never do. */
  contains(ip: string): boolean {
    const parsed = parseIp(ip);
    return parsed !== undefined && parsed.family === this.family && this.containsValue(parsed.value);
  }

  containsValue(value: bigint): boolean {
    return value >= this.network && value < this.network + this.size;
  }

  /** Whether the value is an address pods may receive (not network, gateway, broadcast or outside). */
  isAssignable(value: bigint): boolean {
    return value >= this.firstAssignable && value <= this.lastHost;
  }

  /**
   * Yields every assignable address exactly once, starting at `from` and wrapping around from
   * lastHost to firstAssignable. A `from` outside the assignable span starts at firstAssignable.
   * Lazy: a /64 is never materialised.
   */
  *assignable(from: bigint = this.firstAssignable): Generator<bigint, void, undefined> {
    const start = this.isAssignable(from) ? from : this.firstAssignable;
    for (let v = start; v <= this.lastHost; v++) yield v;
    for (let v = this.firstAssignable; v < start; v++) yield v;
  }

  /** The assignable address after `value`, wrapping around (the allocator's next-candidate cursor). */
  nextAssignable(value: bigint): bigint {
    return value >= this.firstAssignable && value < this.lastHost ? value + 1n : this.firstAssignable;
  }
}

/**
 * Parses "10.244.1.0/24" or "fd00:10:244:1::/64". Throws ERR_INVALID_CONFIG naming `what` and the
 * value for bad syntax, host bits set, or a prefix that leaves no assignable address once network,
 * gateway and (IPv4) broadcast are taken out: /31 and /32 for IPv4, /127 and /128 for IPv6.
 */
export function parseCidr(text: string, what = 'CIDR'): Cidr {
  const p = parsePrefixOrThrow(text, what);
  const cidr = new Cidr(p.family, p.network, p.length);
  if (cidr.assignableCount < 1n) {
    throw new InvalidConfigError(
      `invalid ${what} ${JSON.stringify(text)}: too small: no address left after network, gateway and broadcast`,
    );
  }
  return cidr;
}
