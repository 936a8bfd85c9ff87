/**
 * One agent per node. Before it touches anything, the agent takes an exclusive flock(2) on
 * `agent.lock` in its state directory and in its socket directory, and keeps both descriptors open
 * until it stops; the kernel drops the locks when the process dies, however it dies. A second agent
 * (a DaemonSet update with surge, a start by hand beside the DaemonSet, a restart race; in this
 * network namespace or another, since the lock is on the file) finds a lock held and refuses to start,
 * naming the holder's PID, which the holder writes into the file once it has the lock.
 *
 * The two directories are checked here too, so that a bad `socket` or `stateDir` stops the start
 * naming its key before anything is installed.
 */
import {
  closeSync,
  ftruncateSync,
  lstatSync,
  openSync,
  readFileSync,
  realpathSync,
  statSync,
  writeSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { InvalidConfigError, NotAvailableError } from '../base/errors.js';
import { mkdirDurably } from '../ipam/fs-durable.js';
import { tryLockExclusive } from '../kernel/libc.js';

export const LOCK_FILE = 'agent.lock';

/** The held locks; `release` closes their descriptors (idempotent). */
export class NodeLock {
  readonly paths: readonly string[];
  #fds: number[];

  private constructor(paths: string[], fds: number[]) {
    this.paths = paths;
    this.#fds = fds;
  }

  /**
   * Takes the lock of `stateDir` and of the directory of `socket` (one lock when they are the same
   * directory), creating the directories. Throws `ERR_INVALID_CONFIG` naming the key when a directory
   * cannot be one, `ERR_NOT_AVAILABLE` naming the holder's PID when another agent holds a lock.
   */
  static async acquire(keys: { stateDir: string; socket: string; controlSocket: string }): Promise<NodeLock> {
    const dirs = new Map<string, string>(); // real path -> key
    for (const [key, dir] of [
      ['stateDir', keys.stateDir],
      ['socket', dirname(keys.socket)],
    ] as const) {
      const real = await directory(key, dir);
      if (!dirs.has(real)) dirs.set(real, key);
    }
    const paths: string[] = [];
    const fds: number[] = [];
    try {
      for (const [dir, key] of dirs) {
        const path = join(dir, LOCK_FILE);
        const fd = openSync(path, 'a+', 0o600); // O_CLOEXEC: no helper process inherits the lock
        fds.push(fd);
        if (!tryLockExclusive(fd)) {
          const holder = readFileSync(path, 'utf8').trim();
          throw new NotAvailableError(
            `another podwire agent${/^\d+$/.test(holder) ? ` (PID ${holder})` : ''} holds ${path}: ` +
              `this node's ${key === 'socket' ? 'socket directory' : 'state directory'} (${key}) is in use; ` +
              'stop that agent first (one agent per node)',
          );
        }
        ftruncateSync(fd, 0);
        writeSync(fd, `${process.pid}\n`);
        paths.push(path);
      }
    } catch (err) {
      for (const fd of fds) closeSync(fd);
      throw err;
    }
    try {
      // Under the lock: a socket file left here is a dead agent's, which the start replaces; anything
      // else at that path is not ours to remove.
      for (const path of [keys.socket, keys.controlSocket]) notSomethingElse(path);
    } catch (err) {
      for (const fd of fds) closeSync(fd);
      throw err;
    }
    return new NodeLock(paths, fds);
  }

  release(): void {
    for (const fd of this.#fds) closeSync(fd);
    this.#fds = [];
  }
}

/**
 * Creates `dir` if missing, durably (the state directory holds the IPAM claims: its own entry in its
 * parent must survive a power cut as the claims' entries do, I4); returns its real path, or throws
 * naming `key` when it cannot be a directory.
 */
async function directory(key: string, dir: string): Promise<string> {
  try {
    await mkdirDurably(dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'EEXIST' || code === 'ENOTDIR'
        ? `${firstNonDirectory(dir)} is not a directory`
        : `cannot create ${dir} (${code ?? String(err)})`;
    throw new InvalidConfigError(
      `agent config: ${key}: ${why}${key === 'socket' ? ' (the socket directory)' : ''}`,
      { cause: err },
    );
  }
  return realpathSync(dir);
}

/** The first component of `dir` that exists and is not a directory (for the error message). */
function firstNonDirectory(dir: string): string {
  let d = dir;
  const chain: string[] = [];
  while (d !== dirname(d)) {
    chain.unshift(d);
    d = dirname(d);
  }
  for (const p of chain) {
    try {
      if (!statSync(p).isDirectory()) return p;
    } catch {
      break;
    }
  }
  return dir;
}

/** Throws naming `socket` when `path` exists and is not a unix socket (a file, a directory). */
function notSomethingElse(path: string): void {
  let st: ReturnType<typeof lstatSync>;
  try {
    st = lstatSync(path);
  } catch {
    return;
  }
  if (!st.isSocket())
    throw new InvalidConfigError(
      `agent config: socket: ${path} exists and is not a socket; the agent will not replace it`,
    );
}
