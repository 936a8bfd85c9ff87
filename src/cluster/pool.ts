/**
 * The pod CIDR pool: `clusterCIDRs` cut into node-sized subnets (`nodeCIDRMaskSize`), one family at a
 * time. The candidate order is deterministic (cluster CIDRs in configuration order, lowest subnet
 * first), so concurrent leasers contend for the same next subnet and the store's compare-and-swap
 * decides; nobody guesses.
 */
import { InvalidConfigError, type PodwireError } from '../base/errors.js';
import { type IpFamily, isPrefix, type Prefix, parsePrefix, prefixContains, subnets } from '../base/ip.js';
import type { PodCIDRPool } from './store.js';

/** A node CIDR must leave pods at least one address besides network, gateway and (IPv4) broadcast. */
const LONGEST_MASK: Record<IpFamily, number> = { 4: 30, 6: 126 };

export interface FamilyPool {
  family: IpFamily;
  /** The cluster CIDRs of this family, in configuration order. */
  clusterCIDRs: Prefix[];
  maskSize: number;
}

/** A validated pool, one entry per family in the order the families first appear in clusterCIDRs. */
export interface ParsedPool {
  families: FamilyPool[];
}

function bad(key: string, why: string): PodwireError {
  return new InvalidConfigError(`${key}: ${why}`);
}

/**
 * Validates the agent configuration's `clusterCIDRs` and `nodeCIDRMaskSize` (errors name the key,
 * e.g. "nodeCIDRMaskSize.ipv6: ..."). Cluster CIDRs may not overlap; each family present needs a
 * mask size no shorter than its shortest cluster CIDR's prefix.
 */
export function parsePodCIDRPool(clusterCIDRs: unknown, nodeCIDRMaskSize: unknown): PodCIDRPool {
  return toPodCIDRPool(parsePool(clusterCIDRs, nodeCIDRMaskSize));
}

export function parsePool(clusterCIDRs: unknown, nodeCIDRMaskSize: unknown): ParsedPool {
  if (!Array.isArray(clusterCIDRs) || clusterCIDRs.length === 0) {
    throw bad('clusterCIDRs', 'must be a non-empty list of CIDRs');
  }
  const masks = nodeCIDRMaskSize ?? {};
  if (masks === null || typeof masks !== 'object' || Array.isArray(masks)) {
    throw bad('nodeCIDRMaskSize', 'must be a mapping like {ipv4: 24, ipv6: 64}');
  }
  for (const key of Object.keys(masks)) {
    if (key !== 'ipv4' && key !== 'ipv6') throw bad(`nodeCIDRMaskSize.${key}`, 'unknown key');
  }
  const families: FamilyPool[] = [];
  for (const [i, text] of (clusterCIDRs as unknown[]).entries()) {
    const prefix = parsePrefix(text as string);
    if (!isPrefix(prefix)) throw bad(`clusterCIDRs[${i}]`, `${JSON.stringify(text)}: ${prefix.error}`);
    for (const other of families.flatMap((f) => f.clusterCIDRs)) {
      if (prefixContains(other, prefix) || prefixContains(prefix, other)) {
        throw bad(`clusterCIDRs[${i}]`, `${prefix.text} overlaps ${other.text}`);
      }
    }
    let pool = families.find((f) => f.family === prefix.family);
    if (pool === undefined) {
      const key = prefix.family === 4 ? 'ipv4' : 'ipv6';
      const mask = (masks as Record<string, unknown>)[key];
      if (typeof mask !== 'number' || !Number.isInteger(mask)) {
        throw bad(`nodeCIDRMaskSize.${key}`, `must be an integer (clusterCIDRs has IPv${prefix.family})`);
      }
      if (mask > LONGEST_MASK[prefix.family]) {
        throw bad(
          `nodeCIDRMaskSize.${key}`,
          `${mask} leaves no pod address; at most ${LONGEST_MASK[prefix.family]}`,
        );
      }
      pool = { family: prefix.family, clusterCIDRs: [], maskSize: mask };
      families.push(pool);
    }
    if (pool.maskSize < prefix.length) {
      const key = prefix.family === 4 ? 'ipv4' : 'ipv6';
      throw bad(
        `nodeCIDRMaskSize.${key}`,
        `${pool.maskSize} is shorter than clusterCIDRs[${i}] ${prefix.text}`,
      );
    }
    pool.clusterCIDRs.push(prefix);
  }
  return { families };
}

export function toPodCIDRPool(pool: ParsedPool): PodCIDRPool {
  const out: PodCIDRPool = { clusterCIDRs: [], nodeCIDRMaskSize: {} };
  for (const f of pool.families) {
    out.clusterCIDRs.push(...f.clusterCIDRs.map((p) => p.text));
    out.nodeCIDRMaskSize[f.family === 4 ? 'ipv4' : 'ipv6'] = f.maskSize;
  }
  return out;
}

/** Whether `cidr` is a node CIDR this family pool could have handed out (inside it, right size). */
export function poolHolds(pool: FamilyPool, cidr: Prefix): boolean {
  return (
    cidr.family === pool.family &&
    cidr.length === pool.maskSize &&
    pool.clusterCIDRs.some((c) => prefixContains(c, cidr))
  );
}

/** Every node CIDR of the family pool, in candidate order. Lazy. */
export function* candidates(pool: FamilyPool): Generator<Prefix, void, undefined> {
  for (const cluster of pool.clusterCIDRs) yield* subnets(cluster, pool.maskSize);
}

/** "10.244.0.0/16 as /24s", for exhaustion errors. */
export function describeFamilyPool(pool: FamilyPool): string {
  return `${pool.clusterCIDRs.map((c) => c.text).join(', ')} as /${pool.maskSize}s`;
}
