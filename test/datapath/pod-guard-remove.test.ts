/**
 * removePodGuard's fallback, one element at a time, at the NfTables seam (a fake that fails on cue;
 * the kernel paths are in linux-bridge-pod-guard.test.ts): an element already gone (ENOENT) is no
 * error, any other failure is the caller's to hear, so no identity stays in the guards unknown to any
 * record. Depends on the errno check in src/datapath/linux-bridge/pod-guard.ts (removePodGuard).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { removePodGuard } from '../../src/datapath/linux-bridge/pod-guard.js';
import { KernelError } from '../../src/kernel/libc.js';
import type { NfTables } from '../../src/kernel/netlink/nf-tables.js';

const POD = { hostIfname: 'pwtest0', mac: '0a:58:0a:f4:00:05', ips: ['10.244.0.5'] };

/** Every batch fails (so the fallback runs); single elements fail with `errno` from the second on. */
function failing(errno: number): { nf: NfTables; deleted: number } {
  const state = { deleted: 0 };
  const nf = {
    deleteElements(_f: number, _t: string, groups: Array<{ keys: unknown[] }>) {
      const one = groups.length === 1 && groups[0]?.keys.length === 1;
      if (one && state.deleted === 0) {
        state.deleted++;
        return;
      }
      throw new KernelError('NFT_MSG_DELSETELEM', one ? errno : 16);
    },
  } as unknown as NfTables;
  return {
    nf,
    get deleted() {
      return state.deleted;
    },
  };
}

test('elements already gone (ENOENT) are no error', () => {
  const f = failing(2);
  removePodGuard(f.nf, POD);
  assert.equal(f.deleted, 1);
});

test('any other failure of a single element is thrown', () => {
  const f = failing(16); // EBUSY
  assert.throws(
    () => removePodGuard(f.nf, POD),
    (e: unknown) => e instanceof KernelError && e.errno === 16,
  );
});
