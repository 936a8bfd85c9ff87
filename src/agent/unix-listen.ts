/** Listening on a unix socket path owned by the agent: root-only, replacing a stale socket file. */
import { chmodSync, mkdirSync, rmSync } from 'node:fs';
import type { Server } from 'node:net';
import { dirname } from 'node:path';

/**
 * Listens on `path` with mode 0600, creating its directory and removing a socket left by a crash.
 * The socket is created under umask 177 (bind happens inside `listen`, synchronously for a path), so
 * it never exists with a wider mode, not even between its creation and the chmod. After listening,
 * `onError` stays the server's error listener for good: an accept that fails (EMFILE when the agent
 * is out of descriptors) is logged, and the agent serves on instead of dying of an unhandled 'error'.
 */
export async function listenUnix(server: Server, path: string, onError: (err: Error) => void): Promise<void> {
  mkdirSync(dirname(path), { recursive: true, mode: 0o755 });
  rmSync(path, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    const umask = process.umask(0o177);
    try {
      server.listen(path, () => {
        server.off('error', reject);
        resolve();
      });
    } finally {
      process.umask(umask);
    }
  });
  server.on('error', onError);
  chmodSync(path, 0o600);
}
