/**
 * Issue 15, finding 7: the agent's sockets were created with the umask's mode and chmod'ed to 0600
 * only after listen completed: a window in which any local user could connect. Depends on the umask
 * 077 around `server.listen` in src/agent/unix-listen.ts.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { listenUnix } from '../../../src/agent/unix-listen.js';

test('finding 7: the socket file is 0600 from the moment it exists', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pwt-sock-'));
  const server = createServer();
  const umask = process.umask(0); // the widest a service manager might hand the agent
  try {
    const path = join(dir, 'cni.sock');
    const listening = listenUnix(server, path, () => undefined);
    // bind(2) has run inside listen(), before listenUnix's first await: the file exists now.
    assert.equal(statSync(path).mode & 0o777, 0o600, 'mode right after bind');
    await listening;
    assert.equal(statSync(path).mode & 0o777, 0o600);
  } finally {
    process.umask(umask);
    await new Promise<void>((r) => server.close(() => r()));
    rmSync(dir, { recursive: true, force: true });
  }
});
