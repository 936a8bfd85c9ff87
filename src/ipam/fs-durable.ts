/**
 * Durable file-system steps for FileStore. Every FileHandle opened here is closed on every path;
 * when both the work and the close fail, both errors are kept.
 */

import { type FileHandle, link, mkdir, open, readdir, stat, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';

/** The errno code of a Node system error, if it is one. */
export function errnoCode(err: unknown): string | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string')
    return err.code;
  return undefined;
}

/** Runs `fn` on a freshly opened handle and closes it, whatever happens. */
export async function withFile<T>(
  path: string,
  flags: string,
  mode: number | undefined,
  fn: (fh: FileHandle) => Promise<T>,
): Promise<T> {
  const fh = await open(path, flags, mode);
  let result: T;
  try {
    result = await fn(fh);
  } catch (err) {
    try {
      await fh.close();
    } catch (closeErr) {
      throw new AggregateError([err, closeErr], `${path}: operation and close both failed`, { cause: err });
    }
    throw err;
  }
  await fh.close();
  return result;
}

/**
 * Creates `path` (which must not exist), writes `data`, and fdatasyncs it before resolving: the data
 * and the size are durable; the name becomes durable with its directory's fsync.
 */
export async function writeNewFileDurably(path: string, data: string): Promise<void> {
  await withFile(path, 'wx', 0o644, async (fh) => {
    await fh.writeFile(data, 'utf8');
    await fh.datasync();
  });
}

/** fsync of a directory: makes the entries created or removed in it durable. */
export async function syncDir(path: string): Promise<void> {
  await withFile(path, 'r', undefined, (fh) => fh.sync());
}

/** Hard-links `existing` as `target` unless `target` exists: the atomic compare-and-create. */
export async function linkIfAbsent(existing: string, target: string): Promise<boolean> {
  try {
    await link(existing, target);
    return true;
  } catch (err) {
    if (errnoCode(err) === 'EEXIST') return false;
    throw err;
  }
}

/** unlink(2); resolves whether the file existed. */
export async function unlinkIfExists(path: string): Promise<boolean> {
  try {
    await unlink(path);
    return true;
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return false;
    throw err;
  }
}

/** Directory entry names, or [] when the directory does not exist. */
export async function readdirIfExists(path: string): Promise<string[]> {
  try {
    return await readdir(path);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return [];
    throw err;
  }
}

/** Names of the subdirectories of `path` (other entries are skipped). */
export async function subdirectories(path: string): Promise<string[]> {
  const entries = await readdir(path, { withFileTypes: true });
  return entries.filter((e) => e.isDirectory()).map((e) => e.name);
}

/** mtime in ms, or undefined when the file is gone. */
export async function mtimeIfExists(path: string): Promise<number | undefined> {
  try {
    return (await stat(path)).mtimeMs;
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * `mkdir -p` whose new entries are durable: every directory that contains a newly created one is
 * fsynced. Also fsyncs the parent of `path` when `path` already existed, because another process
 * may have created it an instant ago without having synced its parent yet.
 */
export async function mkdirDurably(path: string): Promise<void> {
  const first = await mkdir(path, { recursive: true, mode: 0o755 });
  const created: string[] = [];
  if (first !== undefined) {
    for (let p = path; ; p = dirname(p)) {
      created.push(p);
      if (p === first || dirname(p) === p) break;
    }
  } else {
    created.push(path);
  }
  for (const dir of created) await syncDir(dirname(dir));
}
