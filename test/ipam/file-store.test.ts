import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { PodwireError } from '../../src/base/errors.js';
import { FileStore } from '../../src/ipam/file-store.js';
import { storeCompliance } from './store-compliance.js';
import { withTempDir } from './tmpdir.js';

storeCompliance('FileStore', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'podwire-ipam-'));
  // A nested path that does not exist yet: open creates it.
  const storeDir = join(dir, 'var', 'lib', 'podwire', 'ipam');
  return {
    open: () => FileStore.open(storeDir),
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
});

const rec = { containerId: 'c1', ifname: 'eth0', createdAt: '2024-05-01T12:00:00.000Z' };
const owner = { containerId: 'c1', ifname: 'eth0' };

/** A pid that no process has: a child that has already exited and been reaped. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', '']);
  assert.ok(child.pid !== undefined && child.pid > 0);
  return child.pid;
}

/** Opens a store, runs `fn`, closes the store whatever happens. */
async function withStore(dir: string, fn: (store: FileStore) => Promise<void>): Promise<void> {
  const store = await FileStore.open(dir);
  try {
    await fn(store);
  } finally {
    await store.close();
  }
}

describe('FileStore on disk', () => {
  test('one file per claim, named after the canonical address, holding the JSON record', () =>
    withTempDir(async (dir) => {
      await withStore(dir, async (store) => {
        assert.equal(await store.claim('10.244.1.0/24', '10.244.1.5', rec), true);
        assert.equal(await store.claim('fd00:10:244:1::/64', 'fd00:10:244:1:0::5', rec), true);
      });
      assert.deepEqual((await readdir(dir)).sort(), ['10.244.1.0_24', 'fd00-10-244-1--_64']);
      assert.deepEqual(await readdir(join(dir, '10.244.1.0_24')), ['10.244.1.5']);
      assert.deepEqual(await readdir(join(dir, 'fd00-10-244-1--_64')), ['fd00_10_244_1__5']);
      assert.deepEqual(JSON.parse(await readFile(join(dir, '10.244.1.0_24', '10.244.1.5'), 'utf8')), rec);
    }));

  test('claims leave no temp file behind, won or lost', () =>
    withTempDir(async (dir) => {
      await withStore(dir, async (store) => {
        const results = await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            store.claim('r', `10.0.0.${i % 3}`, { ...rec, containerId: `c${i}` }),
          ),
        );
        assert.equal(results.filter(Boolean).length, 3);
        assert.equal(await store.release('r', '10.0.0.1', { containerId: 'nobody', ifname: 'eth0' }), false);
      });
      assert.deepEqual((await readdir(join(dir, 'r'))).sort(), ['10.0.0.0', '10.0.0.1', '10.0.0.2']);
    }));

  test('open removes temp files of dead writers and old ones, and keeps a live writer’s fresh one', () =>
    withTempDir(async (dir) => {
      const range = join(dir, '10.244.1.0_24');
      await mkdir(range, { recursive: true });
      const dead = `.tmp-${deadPid()}-00aa`;
      const malformed = '.tmp-garbage';
      const oldOwn = `.tmp-${process.pid}-00bb`;
      const freshOwn = `.tmp-${process.pid}-00cc`;
      for (const name of [dead, malformed, oldOwn, freshOwn]) await writeFile(join(range, name), '{"contain');
      const hourAgo = new Date(Date.now() - 3_600_000);
      await utimes(join(range, oldOwn), hourAgo, hourAgo);
      await writeFile(join(range, '10.244.1.3'), JSON.stringify(rec));
      await withStore(dir, async (store) => {
        assert.deepEqual((await readdir(range)).sort(), [freshOwn, '10.244.1.3']);
        assert.deepEqual((await store.list('10.244.1.0/24')).claims, [{ ip: '10.244.1.3', rec }]);
      });
    }));

  test('list ignores files that are not claims', () =>
    withTempDir(async (dir) => {
      const range = join(dir, 'r');
      await mkdir(range, { recursive: true });
      for (const name of ['lock', 'last_reserved_ip.0', '10.0.0.01', 'FD00__1', '10.0.0.3']) {
        await writeFile(join(range, name), JSON.stringify(rec));
      }
      await withStore(dir, async (store) => {
        assert.deepEqual((await store.list('r')).claims, [{ ip: '10.0.0.3', rec }]);
      });
    }));

  // Depends on FileStore.list's `unreadable` branch (file-store.ts, readClaimFile's result other than
  // `record`): before it, one torn file made this listing reject for the whole range.
  test('a corrupt record is listed as unreadable with its file and reason, never read as free; the listing still works', () =>
    withTempDir(async (dir) => {
      const range = join(dir, 'r');
      await mkdir(range, { recursive: true });
      await writeFile(join(range, '10.0.0.3'), JSON.stringify(rec));
      await writeFile(join(range, '10.0.0.4'), '{"containerId": "c1", "ifn');
      await writeFile(join(range, '10.0.0.5'), '{"containerId": "c1"}');
      await writeFile(join(range, '10.0.0.6'), '');
      await withStore(dir, async (store) => {
        const listing = await store.list('r');
        assert.deepEqual(listing.claims, [{ ip: '10.0.0.3', rec }]);
        assert.deepEqual(
          listing.unreadable.sort((a, b) => a.ip.localeCompare(b.ip)),
          [
            { ip: '10.0.0.4', where: join(range, '10.0.0.4'), reason: 'not JSON' },
            { ip: '10.0.0.5', where: join(range, '10.0.0.5'), reason: 'lacks owner fields' },
            { ip: '10.0.0.6', where: join(range, '10.0.0.6'), reason: 'empty' },
          ],
        );
        // The store never removes such a file (its owner is unknown) and never claims over it.
        const corrupt = (file: string) => (err: unknown) =>
          err instanceof PodwireError && err.code === 'ERR_STORE' && err.message.includes(file);
        await assert.rejects(store.release('r', '10.0.0.4', owner), corrupt('10.0.0.4'));
        await assert.rejects(store.release('r', '10.0.0.5', owner), corrupt('10.0.0.5'));
        assert.equal(await store.claim('r', '10.0.0.4', rec), false);
        assert.equal(await store.claim('r', '10.0.0.6', rec), false);
      });
      assert.deepEqual((await readdir(range)).sort(), ['10.0.0.3', '10.0.0.4', '10.0.0.5', '10.0.0.6']);
    }));

  test('a store directory that cannot be created fails open with ERR_STORE', () =>
    withTempDir(async (dir) => {
      await writeFile(join(dir, 'file'), '');
      await assert.rejects(
        FileStore.open(join(dir, 'file', 'ipam')),
        (err: unknown) =>
          err instanceof PodwireError && err.code === 'ERR_STORE' && err.message.includes('file'),
      );
    }));
});
