/**
 * The agent's unix sockets (unix-listen.ts): bound by the agent itself, so that at the end it removes
 * only the socket file it created. libuv unlinks a listening path on close whoever's it has become.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { listenUnix, unlinkOwnSocket } from '../../src/agent/unix-listen.js';

function closed(server: ReturnType<typeof createServer>): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

test("a socket that became another listener's is left in place when the first one stops", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pwt-sock-'));
  const first = createServer();
  const second = createServer();
  try {
    const path = join(dir, 'cni.sock');
    const mine = await listenUnix(first, path, () => undefined);
    // Someone else replaces the path with a socket of its own (what a second agent did before the lock).
    await listenUnix(second, path, () => undefined);
    await closed(first);
    unlinkOwnSocket(mine);
    assert.equal(existsSync(path), true, "the other listener's socket is still there");
  } finally {
    await closed(second);
    rmSync(dir, { recursive: true, force: true });
  }
});

test('its own socket is removed; a file at the path is refused, not replaced', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pwt-sock-'));
  const server = createServer();
  try {
    const path = join(dir, 'cni.sock');
    const mine = await listenUnix(server, path, () => undefined);
    await closed(server);
    assert.equal(existsSync(path), true, 'closing the server does not remove it (the agent does)');
    unlinkOwnSocket(mine);
    assert.equal(existsSync(path), false);
    writeFileSync(path, 'not a socket');
    await assert.rejects(
      listenUnix(createServer(), path, () => undefined),
      /exists and is not a socket/,
    );
    assert.equal(existsSync(path), true);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
