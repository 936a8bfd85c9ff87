/**
 * Issue 15, finding 5: CNI_NETNS was opened blocking on the agent's main thread before its type was
 * checked, so a FIFO (whose open waits for a writer) or a hung file system stopped every CNI call on
 * the node, and a device path was opened as root. Depends on `NetnsHandle.openChecked`
 * (src/kernel/netns.ts): stat and open on a worker thread, a regular file only, with a timeout.
 */
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { PodwireError } from '../../../src/base/errors.js';
import { NetnsHandle, openPodNetns } from '../../../src/kernel/netns.js';

const NETNS_JS = resolve(import.meta.dirname, '../../../src/kernel/netns.js');

function refusedEnv(pattern: RegExp) {
  return (err: unknown) =>
    err instanceof PodwireError && err.code === 'ERR_INVALID_ENV' && pattern.test(err.message);
}

test('finding 5: a FIFO as CNI_NETNS is refused at once; the process never blocks on it', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pwt-netns-'));
  try {
    const fifo = join(dir, 'fifo');
    execFileSync('mkfifo', [fifo]);
    // In a child process, so that a blocking open (the old behaviour) fails this test by timing out
    // instead of hanging the runner; the child prints the refusal.
    const script = `
      const m = await import(${JSON.stringify(NETNS_JS)});
      const home = m.NetnsHandle.current();
      try { await m.openPodNetns(${JSON.stringify(fifo)}, home); console.log('opened'); }
      catch (err) { console.log(err.code + ' ' + err.message); }`;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
      timeout: 5000,
    });
    assert.match(stdout, /^ERR_INVALID_ENV CNI_NETNS: .* is not a network namespace \(a FIFO\)/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('finding 5: a device, a directory and a missing path are refused before any open', async () => {
  using home = NetnsHandle.current();
  await assert.rejects(openPodNetns('/dev/null', home), refusedEnv(/\(a device\)/));
  await assert.rejects(openPodNetns('/run', home), refusedEnv(/\(a directory\)/));
  await assert.rejects(openPodNetns('/run/netns/pwt-no-such-netns', home), refusedEnv(/cannot open/));
});
