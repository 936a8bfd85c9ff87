/** Listening on a unix socket path owned by the agent: root-only, replacing a stale socket file. */
import { chmodSync, mkdirSync, rmSync } from 'node:fs';
import type { Server } from 'node:net';
import { dirname } from 'node:path';

/** Listens on `path` with mode 0600, creating its directory and removing a socket left by a crash. */
export async function listenUnix(server: Server, path: string): Promise<void> {
  mkdirSync(dirname(path), { recursive: true, mode: 0o755 });
  rmSync(path, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  });
  chmodSync(path, 0o600);
}
