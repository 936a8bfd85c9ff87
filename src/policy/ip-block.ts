/**
 * Sets of addresses as sorted, disjoint, non-adjacent ranges per family, and their minimal CIDR
 * cover: what an ipBlock (`cidr` minus its `except`s) and a rule's peers (the union of its ipBlocks
 * and its peer pods' addresses) become before a backend sees them.
 *
 * A range [first, last] splits into the fewest CIDRs by taking, from `first` on, the largest
 * prefix aligned at the current address that does not pass `last`; merged (non-adjacent) ranges need
 * disjoint covers, so the union of those covers is minimal too.
 */
import { addressBits, type IpFamily, makePrefix, type Prefix, parsePrefixOrThrow } from '../base/ip.js';
import type { IpBlock } from './model.js';

/** Inclusive range of address values. */
export type Range = readonly [first: bigint, last: bigint];

/** Addresses of both families: sorted, disjoint, non-adjacent ranges. */
export interface AddressSet {
  4: Range[];
  6: Range[];
}

export function emptySet(): AddressSet {
  return { 4: [], 6: [] };
}

export function prefixRange(p: Prefix): Range {
  return [p.network, p.network + (1n << BigInt(addressBits(p.family) - p.length)) - 1n];
}

/** Sorts and merges overlapping or adjacent ranges. */
export function normalizeRanges(ranges: readonly Range[]): Range[] {
  const sorted = [...ranges].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const out: Array<[bigint, bigint]> = [];
  for (const [first, last] of sorted) {
    const prev = out[out.length - 1];
    if (prev !== undefined && first <= prev[1] + 1n) {
      if (last > prev[1]) prev[1] = last;
    } else {
      out.push([first, last]);
    }
  }
  return out;
}

/** `ranges` minus `holes`; both normalized. */
export function subtractRanges(ranges: readonly Range[], holes: readonly Range[]): Range[] {
  const out: Range[] = [];
  let h = 0;
  for (const [first, last] of ranges) {
    let start = first;
    while (h < holes.length && (holes[h] as Range)[1] < start) h++;
    let k = h;
    while (k < holes.length && start <= last) {
      const [hf, hl] = holes[k] as Range;
      if (hf > last) break;
      if (hf > start) out.push([start, hf - 1n]);
      start = hl + 1n;
      k++;
    }
    if (start <= last) out.push([start, last]);
  }
  return out;
}

/** The fewest prefixes that cover exactly [first, last] of `family`, lowest first. */
export function rangePrefixes(family: IpFamily, first: bigint, last: bigint): Prefix[] {
  const bits = addressBits(family);
  const out: Prefix[] = [];
  let at = first;
  while (at <= last) {
    // The largest block aligned at `at` ...
    let size = at === 0n ? 1n << BigInt(bits) : at & -at;
    // ... that does not pass `last`.
    while (at + size - 1n > last) size >>= 1n;
    let length = bits;
    for (let s = size; s > 1n; s >>= 1n) length--;
    out.push(makePrefix(family, at, length));
    at += size;
  }
  return out;
}

/** The fewest CIDRs that cover exactly [first, last] of `family`, lowest first. */
export function rangeCidrs(family: IpFamily, first: bigint, last: bigint): string[] {
  return rangePrefixes(family, first, last).map((p) => p.text);
}

/** The minimal CIDR cover of a set: IPv4 first, then IPv6, each lowest first. */
export function setCidrs(set: AddressSet): string[] {
  const out: string[] = [];
  for (const family of [4, 6] as const)
    for (const [first, last] of set[family]) out.push(...rangeCidrs(family, first, last));
  return out;
}

/** The addresses of an ipBlock: its `cidr` minus every `except`. */
export function ipBlockSet(block: IpBlock): AddressSet {
  const cidr = parsePrefixOrThrow(block.cidr, 'ipBlock.cidr');
  const holes = normalizeRanges(
    block.except
      .map((e) => parsePrefixOrThrow(e, 'ipBlock.except'))
      .filter((p) => p.family === cidr.family)
      .map(prefixRange),
  );
  const set = emptySet();
  set[cidr.family] = subtractRanges([prefixRange(cidr)], holes);
  return set;
}

/** `cidr` minus `except` as disjoint canonical CIDRs, minimal, lowest first. */
export function ipBlockCidrs(block: IpBlock): string[] {
  return setCidrs(ipBlockSet(block));
}

/** The union of sets. */
export function unionSets(sets: readonly AddressSet[]): AddressSet {
  if (sets.length === 1) return sets[0] as AddressSet;
  return {
    4: normalizeRanges(sets.flatMap((s) => s[4])),
    6: normalizeRanges(sets.flatMap((s) => s[6])),
  };
}

/** Whether the set holds the address. */
export function setHas(set: AddressSet, family: IpFamily, value: bigint): boolean {
  const ranges = set[family];
  let lo = 0;
  let hi = ranges.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const [first, last] = ranges[mid] as Range;
    if (value < first) hi = mid - 1;
    else if (value > last) lo = mid + 1;
    else return true;
  }
  return false;
}
