/** Group commit: concurrent callers share fsyncs, and none is answered by a sync that began before it asked. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { DirSyncer } from '../../src/ipam/dir-sync.js';

test('20 concurrent syncs cost at most 2 fsyncs; every caller resolves', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pwt-dirsync-'));
  try {
    const s = new DirSyncer(dir);
    const all = Array.from({ length: 20 }, () => s.sync());
    // The first starts a sync; the 19 others wait for the one after it, together.
    assert.equal(new Set(all.slice(1)).size, 1);
    assert.notEqual(all[0], all[1]);
    await Promise.all(all);
    // Idle again: the next caller starts a fresh sync.
    const later = s.sync();
    assert.notEqual(later, all[1]);
    await later;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a failing sync rejects its callers, and the next one runs again', async () => {
  const s = new DirSyncer('/nonexistent/pwt-dirsync');
  await assert.rejects(s.sync(), /ENOENT/);
  await assert.rejects(s.sync(), /ENOENT/);
});
