/**
 * The IPAM store seam: where address claims live. `FileStore` keeps them on the node's disk; an
 * etcd store will keep them cluster-wide; `MemoryStore` is the fake for tests of callers. All of
 * them pass test/ipam/store-compliance.ts.
 *
 * Invariants every implementation keeps:
 * - A claim is keyed by (rangeId, ip) and holds one record. `claim` is compare-and-create: of any
 *   number of concurrent claims of one key (from any process or node sharing the store) at most
 *   one resolves true, and none succeeds while the key exists.
 * - `release` is compare-and-delete on the owner (containerId, ifname): it never removes a claim
 *   that another attachment holds.
 * - `adoptNetwork` writes a network name into a claim that has none (a legacy claim), atomically
 *   (a reader sees the old record or the new one, never a torn one), only when `owner` holds it, and
 *   never changes a name already recorded. It need not survive power loss: a lost adoption leaves the
 *   claim legacy, which is the safe side (see `AllocationRecord.network`).
 * - `claim` is durable before it resolves true: a process kill or power loss afterwards does not
 *   undo it. A crash before it resolves leaves the key either wholly claimed (with a complete record)
 *   or absent. A `claim` that rejects (ERR_STORE) may or may not have taken effect; a `release` by
 *   the same owner settles it.
 * - `release` is visible to every later call and to a reopened store at once, but need not survive
 *   power loss: a release lost that way leaves a claim whose attachment is gone, which the agent's
 *   reconcile at start releases (its host veth no longer exists). Never the other way round: a
 *   claim is never lost, so no address can go to two attachments.
 * - A claim the store holds but cannot read (FileStore: an address file that is not a record, which
 *   only a broken file system or an outside hand makes, since claims are created whole) is listed
 *   in `unreadable`, never dropped and never a failure of the whole listing: its address is taken
 *   (it may be in use) and its owner unknown, so callers neither hand it out nor release it; an
 *   operator removes it (FileStore: the file named by `where`). `claim` of its key resolves false.
 * - Addresses are stored and listed in canonical text (see ip.ts); any accepted spelling of an
 *   address names the same key. Text that is not an address is refused with ERR_INVALID_CONFIG.
 * - After `close` (idempotent; it waits for operations in flight) every call rejects with ERR_STORE.
 * The store does not interpret rangeId beyond it being a non-empty string; the allocator uses the
 * range's canonical CIDR text. The store does not check that `ip` lies inside the range.
 */

import { InvalidConfigError, type PodwireError, StoreError } from '../base/errors.js';
import { canonicalIp } from '../base/ip.js';

export interface AllocationRecord {
  containerId: string;
  ifname: string;
  /** ISO 8601 time of the claim. */
  createdAt: string;
  /** The Kubernetes pod ("namespace/name", from CNI_ARGS), when the runtime said. */
  pod?: string;
  /**
   * The CNI network name (the configuration's `name`) of the attachment: SPEC.md 1.1.0 names an
   * attachment by (network name, CNI_CONTAINERID, CNI_IFNAME), and CNI GC of a network judges only
   * the claims recorded with its name. Absent in claims written before podwire recorded it (legacy
   * claims): no GC of any network removes those, since their network is unknown; they are still
   * released by DEL of their attachment and by reconcile once their host veth is gone, and they
   * take the name of the first successful CHECK of their attachment (`adoptNetwork`).
   */
  network?: string;
}

/** An attachment, the owner of a claim: the CNI (CNI_CONTAINERID, CNI_IFNAME) pair. */
export interface AttachmentKey {
  containerId: string;
  ifname: string;
}

export interface StoredClaim {
  /** Canonical address text. */
  ip: string;
  rec: AllocationRecord;
}

/** A claim whose record cannot be read: taken, owner unknown (see the invariants above). */
export interface UnreadableClaim {
  /** Canonical address text. */
  ip: string;
  /** Where the claim is kept, for the operator who removes it (FileStore: the address file's path). */
  where: string;
  /** Why it cannot be read ("not JSON", "lacks owner fields", an errno). */
  reason: string;
}

/** One range's claims as `list` reads them. */
export interface ClaimListing {
  claims: StoredClaim[];
  /** Claims that exist but whose record cannot be read: taken, owner unknown. */
  unreadable: UnreadableClaim[];
}

export interface IpamStore {
  /** Atomically claims `ip` in `rangeId` for the attachment in `rec`; resolves false if already taken. */
  claim(rangeId: string, ip: string, rec: AllocationRecord): Promise<boolean>;
  /** Removes the claim if (and only if) `owner` holds it; resolves whether something was removed. */
  release(rangeId: string, ip: string, owner: AttachmentKey): Promise<boolean>;
  /**
   * Records `network` in the claim of (rangeId, ip) when `owner` holds it and it names no network yet;
   * resolves whether the record changed.
   */
  adoptNetwork(rangeId: string, ip: string, owner: AttachmentKey, network: string): Promise<boolean>;
  /**
   * Every claim in the range, in no particular order; a snapshot that concurrent calls may change.
   * A claim that cannot be read is in `unreadable`, never a failure of the whole listing.
   */
  list(rangeId: string): Promise<ClaimListing>;
  close(): Promise<void>;
}

/** Whether the record belongs to the attachment. */
export function isOwner(rec: AttachmentKey, owner: AttachmentKey): boolean {
  return rec.containerId === owner.containerId && rec.ifname === owner.ifname;
}

/** A string key for maps of attachments; unambiguous for any pair of strings. */
export function attachmentKey(owner: AttachmentKey): string {
  return JSON.stringify([owner.containerId, owner.ifname]);
}

function nonEmpty(value: unknown): value is string {
  return typeof value === 'string' && value !== '';
}

/** Checks a stored or submitted record; undefined when it is not one (the caller names the source). */
export function asRecord(value: unknown): AllocationRecord | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { containerId, ifname, createdAt, pod, network } = value as Record<string, unknown>;
  if (!nonEmpty(containerId) || !nonEmpty(ifname) || !nonEmpty(createdAt)) return undefined;
  if (pod !== undefined && !nonEmpty(pod)) return undefined;
  if (network !== undefined && !nonEmpty(network)) return undefined;
  const rec: AllocationRecord = { containerId, ifname, createdAt };
  if (pod !== undefined) rec.pod = pod;
  if (network !== undefined) rec.network = network;
  return rec;
}

/**
 * Argument checks shared by implementations, so that they refuse the same inputs.
 * Returns the canonical address text.
 */
export function checkKey(rangeId: string, ip: string): string {
  checkRangeId(rangeId);
  return canonicalIp(ip, 'IPAM address');
}

export function checkRangeId(rangeId: string): void {
  if (!nonEmpty(rangeId)) {
    throw new InvalidConfigError(`invalid IPAM range id ${JSON.stringify(rangeId)}`);
  }
}

export function checkRecord(rec: AllocationRecord): AllocationRecord {
  const checked = asRecord(rec);
  if (checked === undefined) {
    throw new InvalidConfigError(
      `invalid IPAM record ${JSON.stringify(rec)}: containerId, ifname and createdAt must be non-empty strings (pod and network too, when present)`,
    );
  }
  return checked;
}

export function closedError(): PodwireError {
  return new StoreError('IPAM store is closed');
}
