/**
 * The claim record's format across versions: records written before podwire kept the CNI network name
 * (legacy, no `network`) still load, are released by their owner, and take a name once; records with
 * the name keep it through the file store and the allocator. Files are written by hand, as the older
 * version left them on disk.
 */
import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { NodeLocalAllocator } from '../../src/ipam/allocator.js';
import { FileStore } from '../../src/ipam/file-store.js';
import { asRecord } from '../../src/ipam/store.js';
import { withTempDir } from './tmpdir.js';

const LEGACY = { containerId: 'old', ifname: 'eth0', createdAt: '2025-01-01T00:00:00.000Z', pod: 'ns/web' };

test('asRecord: a legacy record loads without a network; a named one keeps it; a bad name is no record', () => {
  assert.deepEqual(asRecord(LEGACY), LEGACY);
  assert.equal(asRecord(LEGACY)?.network, undefined);
  assert.deepEqual(asRecord({ ...LEGACY, network: 'podwire' }), { ...LEGACY, network: 'podwire' });
  assert.equal(asRecord({ ...LEGACY, network: '' }), undefined);
  assert.equal(asRecord({ ...LEGACY, network: 7 }), undefined);
  // Keys nobody defines (a later version's) are dropped, not refused.
  assert.deepEqual(asRecord({ ...LEGACY, later: true }), LEGACY);
});

test('legacy files on disk: the allocator loads them, adopts a name once, records it with new claims', () =>
  withTempDir(async (dir) => {
    // The layout an earlier podwire left: <dir>/<range dir>/<address>, a JSON record without network.
    await mkdir(join(dir, '10.244.9.0_24'));
    const legacyFile = join(dir, '10.244.9.0_24', '10.244.9.2');
    await writeFile(legacyFile, `${JSON.stringify(LEGACY)}\n`);

    const store = await FileStore.open(dir);
    try {
      const ipam = await NodeLocalAllocator.open(['10.244.9.0/24'], store);
      const old = { containerId: 'old', ifname: 'eth0' };
      const [loaded] = ipam.owned(old);
      assert.equal(loaded?.ip, '10.244.9.2');
      assert.equal(loaded?.network, undefined);
      assert.deepEqual(
        (await ipam.list()).map((a) => [a.containerId, a.network]),
        [['old', undefined]],
      );

      // A new claim records its network; the legacy address is not handed out again.
      const [fresh] = await ipam.allocate({ containerId: 'new', ifname: 'net1' }, { network: 'podwire-sec' });
      assert.equal(fresh?.ip, '10.244.9.3');
      assert.equal(ipam.owned({ containerId: 'new', ifname: 'net1' })[0]?.network, 'podwire-sec');
      const onDisk = JSON.parse(await readFile(join(dir, '10.244.9.0_24', '10.244.9.3'), 'utf8'));
      assert.equal(onDisk.network, 'podwire-sec');

      // Adoption: once, on disk, atomically replacing the record; a second name does not replace it.
      assert.deepEqual(await ipam.adoptNetwork(old, 'podwire'), ['10.244.9.2']);
      assert.deepEqual(await ipam.adoptNetwork(old, 'podwire-sec'), []);
      assert.deepEqual(await ipam.adoptNetwork({ containerId: 'new', ifname: 'net1' }, 'podwire'), []);
      assert.deepEqual(JSON.parse(await readFile(legacyFile, 'utf8')), { ...LEGACY, network: 'podwire' });
      assert.equal(ipam.owned(old)[0]?.network, 'podwire');

      // A reopened allocator sees the adopted name; the owner releases as before.
      const again = await NodeLocalAllocator.open(['10.244.9.0/24'], store);
      assert.equal(again.owned(old)[0]?.network, 'podwire');
      assert.deepEqual(
        (await again.release(old)).map((a) => a.ip),
        ['10.244.9.2'],
      );
    } finally {
      await store.close();
    }
  }));

test('a legacy claim is released by its owner without adoption', () =>
  withTempDir(async (dir) => {
    await mkdir(join(dir, '10.244.9.0_24'));
    await writeFile(join(dir, '10.244.9.0_24', '10.244.9.7'), `${JSON.stringify(LEGACY)}\n`);
    const store = await FileStore.open(dir);
    try {
      const ipam = await NodeLocalAllocator.open(['10.244.9.0/24'], store);
      assert.deepEqual(
        (await ipam.release({ containerId: 'old', ifname: 'eth0' })).map((a) => a.ip),
        ['10.244.9.7'],
      );
      assert.deepEqual((await store.list('10.244.9.0/24')).claims, []);
    } finally {
      await store.close();
    }
  }));
