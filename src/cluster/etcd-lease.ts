/**
 * Pod CIDR leases in etcd. The CIDR key is the lease: `PREFIX/cidrs/CIDR -> node name`, created only
 * if absent, in the same transaction that records the CIDR under `PREFIX/leases/NODE`. So:
 *
 * - no two nodes ever hold the same CIDR: a txn that creates a CIDR key compares its create_revision
 *   with 0, and etcd serialises transactions; of two nodes racing for a CIDR exactly one succeeds;
 * - one node never holds two CIDRs of a family: the txn also compares the node's lease key with the
 *   mod_revision it read, so two concurrent leases for one node cannot both add a CIDR;
 * - a node that holds a CIDR gets it back (restart, re-lease), until `releasePodCIDRs`.
 *
 * Candidates come in a fixed order (pool.ts); the loser of a race reads again and tries the next
 * free one. Every read is one txn of two ranges, i.e. one consistent snapshot.
 */

import { isPrefix, type Prefix, parsePrefix } from '../base/ip.js';
import type { EtcdKeys, EtcdKv, Kv } from './etcd-kv.js';
import { candidates, describeFamilyPool, type FamilyPool, type ParsedPool, poolHolds } from './pool.js';
import { storeError } from './store.js';

/** Enough for hundreds of nodes racing for one pool; beyond it something else is wrong. */
const MAX_ATTEMPTS = 1000;

interface LeaseValue {
  podCIDRs: string[];
}

interface Snapshot {
  lease: Kv | undefined;
  podCIDRs: string[];
  /** Every leased CIDR -> the CIDR key (its value is the holder's name). */
  taken: Map<string, Kv>;
}

export interface LeaseContext {
  kv: EtcdKv;
  keys: EtcdKeys;
  /** Prefix of error messages, e.g. "etcd http://...: leasePodCIDRs node-1". */
  where: string;
  signal?: AbortSignal;
}

async function snapshot(ctx: LeaseContext, name: string): Promise<Snapshot> {
  const res = await ctx.kv.txn(
    { compare: [], success: [{ range: ctx.keys.lease(name) }, { range: ctx.keys.cidrs, prefix: true }] },
    ctx.signal,
  );
  const lease = res.ranges[0]?.[0];
  let podCIDRs: string[] = [];
  if (lease !== undefined) {
    try {
      const value = JSON.parse(lease.value) as LeaseValue;
      if (!Array.isArray(value.podCIDRs)) throw new Error('podCIDRs is not a list');
      podCIDRs = value.podCIDRs.map(String);
    } catch (err) {
      throw storeError(
        `${ctx.where}: ${lease.key} holds a malformed lease: ${lease.value.slice(0, 100)}`,
        err,
      );
    }
  }
  const taken = new Map<string, Kv>();
  for (const kv of res.ranges[1] ?? []) taken.set(kv.key.slice(ctx.keys.cidrs.length), kv);
  return { lease, podCIDRs, taken };
}

/** The node's CIDRs, one per pool family in pool order, leasing the missing ones. */
export async function leasePodCIDRs(ctx: LeaseContext, name: string, pool: ParsedPool): Promise<string[]> {
  const out: string[] = [];
  for (const family of pool.families) out.push(await leaseFamily(ctx, name, family));
  return out;
}

async function leaseFamily(ctx: LeaseContext, name: string, family: FamilyPool): Promise<string> {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const snap = await snapshot(ctx, name);
    const held = snap.podCIDRs
      .map(parsePrefix)
      .filter(isPrefix)
      .find((p) => p.family === family.family);
    if (held !== undefined) return checkHeld(ctx, name, family, held, snap);

    let candidate: Prefix | undefined;
    for (const c of candidates(family)) {
      if (!snap.taken.has(c.text)) {
        candidate = c;
        break;
      }
    }
    if (candidate === undefined) {
      throw storeError(
        `${ctx.where}: no free pod CIDR for node ${name}: every ${describeFamilyPool(family)} is leased`,
      );
    }
    const next: LeaseValue = { podCIDRs: [...snap.podCIDRs, candidate.text] };
    const res = await ctx.kv.txn(
      {
        compare: [
          { key: ctx.keys.cidr(candidate.text), createRevision: '0' },
          { key: ctx.keys.lease(name), modRevision: snap.lease?.modRevision ?? '0' },
        ],
        success: [
          { put: ctx.keys.cidr(candidate.text), value: name },
          { put: ctx.keys.lease(name), value: JSON.stringify(next) },
        ],
      },
      ctx.signal,
    );
    if (res.succeeded) return candidate.text;
    // Another node took the candidate, or this node's lease changed: read again.
  }
  throw storeError(`${ctx.where}: node ${name}: gave up after ${MAX_ATTEMPTS} conflicting lease attempts`);
}

function checkHeld(
  ctx: LeaseContext,
  name: string,
  family: FamilyPool,
  held: Prefix,
  snap: Snapshot,
): string {
  const owner = snap.taken.get(held.text)?.value;
  if (owner !== name) {
    // Cannot happen through podwire (both keys change in one txn); someone edited etcd by hand.
    const who = owner === undefined ? 'no CIDR key backs it' : `node ${owner} holds its CIDR key`;
    throw storeError(`${ctx.where}: node ${name}'s lease names ${held.text} but ${who}`);
  }
  if (!poolHolds(family, held)) {
    throw storeError(
      `${ctx.where}: node ${name} holds ${held.text}, which is not one of ${describeFamilyPool(family)}; ` +
        `remove the node (podwire node remove ${name}) to lease from the new pool`,
    );
  }
  return held.text;
}

/** Deletes the node's lease and every CIDR key naming it, atomically. Returns the CIDRs freed. */
export async function releasePodCIDRs(ctx: LeaseContext, name: string): Promise<string[]> {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const snap = await snapshot(ctx, name);
    const owned = [...snap.taken].filter(([, kv]) => kv.value === name);
    if (snap.lease === undefined && owned.length === 0) return [];
    const res = await ctx.kv.txn(
      {
        compare: [
          { key: ctx.keys.lease(name), modRevision: snap.lease?.modRevision ?? '0' },
          ...owned.map(([, kv]) => ({ key: kv.key, modRevision: kv.modRevision })),
        ],
        success: [{ delete: ctx.keys.lease(name) }, ...owned.map(([, kv]) => ({ delete: kv.key }))],
      },
      ctx.signal,
    );
    if (res.succeeded) return owned.map(([cidr]) => cidr);
  }
  throw storeError(`${ctx.where}: node ${name}: gave up after ${MAX_ATTEMPTS} conflicting release attempts`);
}
