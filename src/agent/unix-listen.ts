/**
 * Listening on a unix socket path owned by the agent: root-only, replacing a stale socket file, and
 * removing at the end only the socket file it created.
 */
import { chmodSync, lstatSync, mkdirSync, rmSync } from 'node:fs';
import type { Server } from 'node:net';
import { dirname } from 'node:path';
import { InvalidConfigError } from '../base/errors.js';
import { AF_UNIX, bind, close, SOCK_STREAM, socket } from '../kernel/libc.js';

/** sun_path holds 108 bytes with its terminating NUL (unix(7)). */
export const UNIX_PATH_MAX = 107;

/** The socket file a listener bound: its path and the inode it had then. */
export interface BoundSocketFile {
  readonly path: string;
  readonly dev: number;
  readonly ino: number;
}

/**
 * Listens on `path` with mode 0600, creating its directory and removing a socket left by a crash (the
 * agent's node lock makes sure no live agent owns it; anything but a socket there is refused).
 *
 * The socket is bound here, under umask 177 and before the first await, so it never exists with a
 * wider mode, not even between its creation and the chmod; the server then listens on the descriptor.
 * Bound that way, libuv does not know the path and does not unlink it on close, which it would do even
 * when the path has meanwhile become someone else's socket: `unlinkOwnSocket` removes it only if it is
 * still the one bound here. After listening, `onError` stays the server's error listener for good: an
 * accept that fails (EMFILE when the agent is out of descriptors) is logged, and the agent serves on.
 */
export async function listenUnix(
  server: Server,
  path: string,
  onError: (err: Error) => void,
): Promise<BoundSocketFile> {
  const name = Buffer.from(path);
  if (name.length > UNIX_PATH_MAX)
    throw new InvalidConfigError(
      `${path}: ${name.length} bytes, a unix socket path holds at most ${UNIX_PATH_MAX}`,
    );
  mkdirSync(dirname(path), { recursive: true, mode: 0o755 });
  const old = lstatOrUndefined(path);
  if (old && !old.isSocket())
    throw new InvalidConfigError(`${path} exists and is not a socket; not replaced`);
  if (old) rmSync(path);
  const fd = socket(AF_UNIX, SOCK_STREAM, 0);
  const umask = process.umask(0o177);
  let file: BoundSocketFile | undefined;
  try {
    bind(fd, sockaddrUn(name)); // Equivalent to bind(2) with a struct sockaddr_un
    const st = lstatSync(path);
    file = { path, dev: st.dev, ino: st.ino };
    chmodSync(path, 0o600); // already 0600 under the umask; says so whatever umask libc applied
  } catch (err) {
    close(fd);
    unlinkOwnSocket(file);
    throw err;
  } finally {
    process.umask(umask);
  }
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ fd }, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    unlinkOwnSocket(file);
    throw err;
  }
  server.on('error', onError);
  return file as BoundSocketFile;
}

/** Removes the socket file if it is still the one `listenUnix` bound; another's is left alone. */
export function unlinkOwnSocket(file: BoundSocketFile | undefined): void {
  if (!file) return;
  const st = lstatOrUndefined(file.path);
  if (st?.isSocket() && st.dev === file.dev && st.ino === file.ino) rmSync(file.path, { force: true });
}

function lstatOrUndefined(path: string): ReturnType<typeof lstatSync> | undefined {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}

/** struct sockaddr_un: sun_family (host order), then the path and its NUL. */
function sockaddrUn(name: Buffer): Buffer {
  const addr = Buffer.alloc(2 + name.length + 1);
  addr.writeUInt16LE(AF_UNIX, 0);
  name.copy(addr, 2);
  return addr;
}
