/**
 * The IPAM store on the node's disk, in the layout of file-names.ts (one file per claimed address,
 * like host-local's /var/lib/cni/networks/<network>/<ip>).
 *
 * claim   = write the record to a temp file in the range dir, fsync it, link(2) it to the address
 *           name (atomic; EEXIST means taken), unlink the temp, fsync the range dir.
 * release = read the record, check the owner, unlink (not fsynced: see the invariants in store.ts).
 *           An address file that is not a record is never removed by the store (ERR_STORE): its
 *           owner is unknown. `list` reports it in `unreadable`; an operator removes it by hand.
 * adopt   = read the record, check the owner and that it names no network, write the new record to
 *           a temp file, fsync it, rename(2) it over the address file (atomic; the dir is not fsynced:
 *           an adoption lost to power loss leaves a legacy claim, see store.ts).
 * The range dir's fsync is group-committed (dir-sync.ts): concurrent claims share one.
 * A crash at any point leaves the address file either absent or complete (it is only ever created
 * by linking an fsynced file), plus at most a stale temp file, which `open` removes.
 *
 * Several processes may share a directory: link(2) arbitrates claims between them. Releases are
 * serialised per address inside one process; across processes the owner check and the unlink are
 * two steps, which is safe as long as one attachment is released by one process at a time (the
 * agent serialises calls per attachment).
 */

import { readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { PodwireError, StoreError } from '../base/errors.js';
import { DirSyncer } from './dir-sync.js';
import {
  addressFileName,
  addressFromFileName,
  isTempFileName,
  rangeDirName,
  tempFileName,
  tempFileWriter,
} from './file-names.js';
import {
  errnoCode,
  linkIfAbsent,
  mkdirDurably,
  mtimeIfExists,
  readdirIfExists,
  subdirectories,
  unlinkIfExists,
  writeNewFileDurably,
} from './fs-durable.js';
import { KeyedMutex } from './keyed-mutex.js';
import {
  type AllocationRecord,
  type AttachmentKey,
  asRecord,
  type ClaimListing,
  checkKey,
  checkRangeId,
  checkRecord,
  closedError,
  type IpamStore,
  isOwner,
} from './store.js';

/** A temp file older than this is stale even if a process with its writer's pid is alive (pid reuse). */
const STALE_TEMP_AGE_MS = 30_000;

export class FileStore implements IpamStore {
  readonly dir: string;
  #closed = false;
  /** Operations started and not yet settled; `close` waits for them. */
  readonly #inFlight = new Set<Promise<unknown>>();
  /** One group-committing fsync per range directory (dir-sync.ts). */
  readonly #syncers = new Map<string, DirSyncer>();
  /** Range dir path -> its durable creation, done once per instance. Rejected entries are dropped. */
  readonly #rangeDirs = new Map<string, Promise<void>>();
  readonly #releases = new KeyedMutex();

  private constructor(dir: string) {
    this.dir = dir;
  }

  /** Opens (creating if needed) the store under `dir` and removes stale temp files left by crashes. */
  static async open(dir: string): Promise<FileStore> {
    try {
      await mkdirDurably(dir);
      for (const name of await subdirectories(dir)) await removeStaleTempFiles(join(dir, name));
    } catch (err) {
      throw storeError(`opening IPAM store ${dir}`, err);
    }
    return new FileStore(dir);
  }

  claim(rangeId: string, ip: string, rec: AllocationRecord): Promise<boolean> {
    return this.#op(`claiming ${ip} in ${rangeId}`, async () => {
      const name = addressFileName(checkKey(rangeId, ip));
      const data = `${JSON.stringify(checkRecord(rec))}\n`;
      const rangeDir = join(this.dir, rangeDirName(rangeId));
      await this.#ensureRangeDir(rangeDir);
      const temp = join(rangeDir, tempFileName());
      let linked: boolean;
      try {
        await writeNewFileDurably(temp, data);
        linked = await linkIfAbsent(temp, join(rangeDir, name));
      } catch (err) {
        await removeAfterFailure(temp, err);
        throw err;
      }
      await unlinkIfExists(temp);
      // One fsync makes both the new link and the temp's removal durable.
      if (linked) await this.#syncer(rangeDir).sync();
      return linked;
    });
  }

  #syncer(rangeDir: string): DirSyncer {
    let s = this.#syncers.get(rangeDir);
    if (!s) {
      s = new DirSyncer(rangeDir);
      this.#syncers.set(rangeDir, s);
    }
    return s;
  }

  release(rangeId: string, ip: string, owner: AttachmentKey): Promise<boolean> {
    return this.#op(`releasing ${ip} in ${rangeId}`, async () => {
      const canonical = checkKey(rangeId, ip);
      const rangeDir = join(this.dir, rangeDirName(rangeId));
      const file = join(rangeDir, addressFileName(canonical));
      return this.#releases.run(file, async () => {
        const rec = await readRecord(file);
        if (rec === undefined || !isOwner(rec, owner)) return false;
        // No fsync: a release lost to power loss is repaired by reconcile (store.ts, invariants).
        return unlinkIfExists(file);
      });
    });
  }

  adoptNetwork(rangeId: string, ip: string, owner: AttachmentKey, network: string): Promise<boolean> {
    return this.#op(`recording network ${network} for ${ip} in ${rangeId}`, async () => {
      const canonical = checkKey(rangeId, ip);
      const rangeDir = join(this.dir, rangeDirName(rangeId));
      const file = join(rangeDir, addressFileName(canonical));
      // On the release mutex: a release of the same claim must not run between the check and the rename,
      // or the rename would bring a released claim back.
      return this.#releases.run(file, async () => {
        const rec = await readRecord(file);
        if (rec === undefined || !isOwner(rec, owner) || rec.network !== undefined) return false;
        const data = `${JSON.stringify(checkRecord({ ...rec, network }))}\n`;
        const temp = join(rangeDir, tempFileName());
        try {
          await writeNewFileDurably(temp, data);
          await rename(temp, file);
        } catch (err) {
          await removeAfterFailure(temp, err);
          throw err;
        }
        return true;
      });
    });
  }

  /**
   * Every address file of the range. One that is not a record (torn, emptied, garbage, or a file the
   * process cannot read) is listed in `unreadable` with its path, not a failure of the listing.
   */
  list(rangeId: string): Promise<ClaimListing> {
    return this.#op(`listing ${rangeId}`, async () => {
      checkRangeId(rangeId);
      const rangeDir = join(this.dir, rangeDirName(rangeId));
      const listing: ClaimListing = { claims: [], unreadable: [] };
      await Promise.all(
        (await readdirIfExists(rangeDir)).map(async (name) => {
          const ip = isTempFileName(name) ? undefined : addressFromFileName(name);
          if (ip === undefined) return; // not a claim (a temp file, or a foreign file)
          const file = join(rangeDir, name);
          const read = await readClaimFile(file);
          if (read.kind === 'record') listing.claims.push({ ip, rec: read.rec });
          else if (read.kind === 'unreadable')
            listing.unreadable.push({ ip, where: file, reason: read.reason });
          // absent: released since readdir
        }),
      );
      return listing;
    });
  }

  /** Refuses new calls, then waits for those in flight. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.allSettled([...this.#inFlight]);
  }

  async #op<T>(what: string, fn: () => Promise<T>): Promise<T> {
    if (this.#closed) throw closedError();
    const p = fn();
    this.#inFlight.add(p);
    try {
      return await p;
    } catch (err) {
      throw storeError(what, err);
    } finally {
      this.#inFlight.delete(p);
    }
  }

  #ensureRangeDir(rangeDir: string): Promise<void> {
    let made = this.#rangeDirs.get(rangeDir);
    if (made === undefined) {
      made = mkdirDurably(rangeDir);
      this.#rangeDirs.set(rangeDir, made);
      made.catch(() => this.#rangeDirs.delete(rangeDir)); // the awaiting claim reports the error
    }
    return made;
  }
}

/** Keeps PodwireErrors (bad arguments) as they are; wraps anything else as ERR_STORE. */
function storeError(what: string, err: unknown): PodwireError {
  if (err instanceof PodwireError) return err;
  const msg = err instanceof Error ? err.message : String(err);
  return new StoreError(`${what}: ${msg}`, { cause: err });
}

/**
 * Read errors that belong to the file (its content or its inode), not to the process: such a file is
 * an unreadable claim. Others (EMFILE, ENOMEM, ...) fail the call, since a retry may succeed.
 */
const FILE_FAULTS = new Set(['EIO', 'EISDIR', 'EACCES', 'EPERM', 'EINVAL', 'ELOOP', 'EUCLEAN', 'EBADMSG']);

type ClaimFile =
  | { kind: 'absent' }
  | { kind: 'record'; rec: AllocationRecord }
  | { kind: 'unreadable'; reason: string; cause?: unknown };

/** What `file` holds: no such file, a record, or something that is not one (and why). */
async function readClaimFile(file: string): Promise<ClaimFile> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT') return { kind: 'absent' };
    if (code !== undefined && FILE_FAULTS.has(code))
      return { kind: 'unreadable', reason: `cannot be read (${code})`, cause: err };
    throw err;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    return { kind: 'unreadable', reason: text === '' ? 'empty' : 'not JSON', cause: err };
  }
  const rec = asRecord(parsed);
  return rec === undefined ? { kind: 'unreadable', reason: 'lacks owner fields' } : { kind: 'record', rec };
}

/** The record in `file`; undefined when there is no such file; ERR_STORE when it is not a record. */
async function readRecord(file: string): Promise<AllocationRecord | undefined> {
  const read = await readClaimFile(file);
  if (read.kind === 'unreadable') {
    throw new StoreError(`IPAM record ${file} is unreadable: ${read.reason}`, { cause: read.cause });
  }
  return read.kind === 'record' ? read.rec : undefined;
}

/** Removes the temp file of a failed claim; if that fails too, both errors are reported. */
async function removeAfterFailure(temp: string, err: unknown): Promise<void> {
  try {
    await unlinkIfExists(temp);
  } catch (unlinkErr) {
    throw new AggregateError([err, unlinkErr], `writing a record failed and its temp file ${temp} remains`, {
      cause: err,
    });
  }
}

/** Whether process `pid` exists (EPERM: it exists but belongs to someone else). */
function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    if (errnoCode(err) === 'ESRCH') return false;
    if (errnoCode(err) === 'EPERM') return true;
    throw err;
  }
}

/**
 * Removes temp files whose writer is gone, or which are too old to belong to a claim in flight.
 * A live process's fresh temp file is left alone: removing it would fail that process's claim.
 */
async function removeStaleTempFiles(rangeDir: string): Promise<void> {
  const now = Date.now();
  for (const name of await readdirIfExists(rangeDir)) {
    if (!isTempFileName(name)) continue;
    const path = join(rangeDir, name);
    const mtime = await mtimeIfExists(path);
    if (mtime === undefined) continue; // its writer finished meanwhile
    const writer = tempFileWriter(name);
    if (writer === undefined || !processExists(writer) || now - mtime > STALE_TEMP_AGE_MS) {
      await unlinkIfExists(path);
    }
  }
}
