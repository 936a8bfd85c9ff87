/**
 * Network namespace handles and the one place where the agent enters another namespace (docs/architecture.md, I1).
 *
 * `setns(2)` moves only the calling thread. Node runs JavaScript on one thread, so while that thread is
 * in another namespace nothing else of the agent may run: `inNetns` is synchronous, refuses callbacks
 * that return a promise, and verifies the thread's namespace inode on the way in and on the way out.
 * If the way back fails the process exits: it must never go on in the wrong namespace.
 */
import {
  closeSync,
  constants as fsc,
  fstatSync,
  open as openCallback,
  openSync,
  type Stats,
  statSync,
} from 'node:fs';
import { stat } from 'node:fs/promises';
import { promisify } from 'node:util';
import koffi from 'koffi';
import { InternalError, InvalidEnvError } from '../base/errors.js';
import { OwnedFd } from '../base/owned-fd.js';
import { CLONE_NEWNET, ioctl, KernelError, setns } from './libc.js';

/** linux/nsfs.h: _IO(0xb7, 0x3), answers the CLONE_NEW* type of a namespace file. */
const NS_GET_NSTYPE = 0xb703;

/** Identity of a namespace: the nsfs device and inode, as `stat -L /proc/self/ns/net` shows them. */
export interface NetnsId {
  dev: bigint;
  ino: bigint;
}

/** The namespace the calling thread is in now. */
export function currentNetnsId(): NetnsId {
  const st = statSync('/proc/thread-self/ns/net', { bigint: true });
  return { dev: st.dev, ino: st.ino };
}

export function sameNetns(a: NetnsId, b: NetnsId): boolean {
  return a.dev === b.dev && a.ino === b.ino;
}

/** An open descriptor on a network namespace. Its one owner disposes it; dispose is idempotent. */
export class NetnsHandle implements Disposable {
  readonly path: string;
  readonly id: NetnsId;
  readonly #fd: OwnedFd;

  private constructor(path: string, fd: number, id: NetnsId) {
    this.path = path;
    this.#fd = new OwnedFd(fd, `netns handle ${path}`);
    this.id = id;
  }

  /**
   * Opens `path` and checks that it is a network namespace. Fails with ERR_INVALID_ENV naming the
   * path when it does not exist or is not a network namespace.
   */
  static open(path: string): NetnsHandle {
    let fd: number;
    try {
      fd = openSync(path, fsc.O_RDONLY); // libuv adds O_CLOEXEC;
    } catch (err) {
      throw new InvalidEnvError(`CNI_NETNS: cannot open ${path}`, { cause: err });
    }
    return NetnsHandle.#adopt(path, fd);
  }

  /**
   * Like `open`, for a path a caller hands in (CNI_NETNS): checked and opened on a libuv worker
   * thread, never on the main thread, and only when it is a regular file (nsfs files are). A FIFO
   * (whose open would wait for a writer), a device (whose open has effects), a directory, or a path
   * on a file system that does not answer within `timeoutMs` is refused without stopping any other
   * call; a late open is closed when it lands.
   */
  static async openChecked(path: string, timeoutMs = OPEN_TIMEOUT_MS): Promise<NetnsHandle> {
    const opening = (async () => {
      let st: Stats;
      try {
        st = await stat(path);
      } catch (err) {
        throw new InvalidEnvError(`CNI_NETNS: cannot open ${path}`, { cause: err });
      }
      if (!st.isFile()) {
        throw new InvalidEnvError(`CNI_NETNS: ${path} is not a network namespace (${fileKind(st)})`);
      }
      try {
        // O_NONBLOCK: should the path have become a FIFO since the stat, the open still returns.
        return await openAsync(path, fsc.O_RDONLY | fsc.O_NONBLOCK | fsc.O_NOCTTY);
      } catch (err) {
        throw new InvalidEnvError(`CNI_NETNS: cannot open ${path}`, { cause: err });
      }
    })();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new InvalidEnvError(`CNI_NETNS: ${path} did not open within ${timeoutMs} ms`)),
        timeoutMs,
      );
    });
    let fd: number;
    try {
      fd = await Promise.race([opening, timeout]);
    } catch (err) {
      // Whatever lands after the timeout is closed, not leaked.
      opening.then(closeSync, () => undefined);
      throw err;
    } finally {
      clearTimeout(timer);
    }
    return NetnsHandle.#adopt(path, fd);
  }

  /** Checks an open descriptor and takes it over; closes it when it is not a network namespace. */
  static #adopt(path: string, fd: number): NetnsHandle {
    try {
      const type = ioctl(fd, NS_GET_NSTYPE);
      if (type !== CLONE_NEWNET) {
        throw new InvalidEnvError(`CNI_NETNS: ${path} is not a network namespace`, {
          cause: type < 0 ? new KernelError('ioctl(NS_GET_NSTYPE)', koffi.errno()) : undefined,
        });
      }
      const st = fstatSync(fd, { bigint: true });
      return new NetnsHandle(path, fd, { dev: st.dev, ino: st.ino });
    } catch (err) {
      closeSync(fd);
      throw err;
    }
  }

  /** The namespace of the calling thread, e.g. the agent's own ("home") namespace at start. */
  static current(): NetnsHandle {
    return NetnsHandle.open('/proc/thread-self/ns/net');
  }

  get fd(): number {
    return this.#fd.fd;
  }

  get closed(): boolean {
    return this.#fd.closed;
  }

  close(): void {
    this.#fd.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/** How long a CNI_NETNS path may take to open before the call is refused. */
const OPEN_TIMEOUT_MS = 5000;

const openAsync = promisify(openCallback);

function fileKind(st: Stats): string {
  if (st.isFIFO()) return 'a FIFO';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  if (st.isDirectory()) return 'a directory';
  if (st.isSocket()) return 'a socket';
  return 'not a regular file';
}

/**
 * Opens a pod's namespace (off the main thread, see `openChecked`) and refuses one that is the
 * agent's own (docs/architecture.md, I1).
 */
export async function openPodNetns(path: string, home: NetnsHandle): Promise<NetnsHandle> {
  const h = await NetnsHandle.openChecked(path);
  if (sameNetns(h.id, home.id)) {
    h.close();
    throw new InvalidEnvError(`CNI_NETNS: ${path} is the node's own network namespace`);
  }
  return h;
}

type NotPromise<T> = T extends PromiseLike<unknown> ? never : T;

/** What happens when the thread cannot return home; replaced only by tests of this path. */
let onReturnFailure = (err: unknown): never => {
  process.stderr.write(
    `${JSON.stringify({ level: 'fatal', msg: 'cannot return to the agent network namespace', err: String(err) })}\n`,
  );
  process.exit(70);
};

/** Moves the thread back to `home` and verifies it; the process exits if either fails. */
function returnHome(home: NetnsHandle): void {
  try {
    setns(home.fd, CLONE_NEWNET);
  } catch (err) {
    onReturnFailure(err);
  }
  if (!sameNetns(currentNetnsId(), home.id)) {
    onReturnFailure(new InternalError('thread namespace differs from home after setns'));
  }
}

/**
 * Runs `fn` with the calling thread inside `target`, then returns it to `home`. `fn` must be
 * synchronous: it should only create sockets or open /proc/sys files, which stay bound to `target`.
 */
export function inNetns<T>(target: NetnsHandle, home: NetnsHandle, fn: () => NotPromise<T>): NotPromise<T> {
  const before = currentNetnsId();
  if (!sameNetns(before, home.id)) {
    return onReturnFailure(new InternalError('thread is not in its home namespace on entry'));
  }
  setns(target.fd, CLONE_NEWNET);
  let result: NotPromise<T>;
  try {
    const inside = currentNetnsId();
    if (!sameNetns(inside, target.id)) {
      throw new InternalError(`setns into ${target.path} landed in another namespace`);
    }
    result = fn();
  } finally {
    returnHome(home);
  }
  if (result !== null && typeof (result as { then?: unknown })?.then === 'function') {
    throw new InternalError('inNetns callback returned a promise: namespace work must be synchronous');
  }
  return result;
}

/** For tests of the fatal path only. */
export function setOnReturnFailure(fn: (err: unknown) => never): void {
  onReturnFailure = fn;
}
