/**
 * `NfTables.changeElementsAsync` (`NfnetlinkSocket.batchAsync`) against the real kernel in a throwaway
 * namespace: the kernel commits a batch inside `sendto`, which for a big change of an interval set of
 * concatenations (the NetworkPolicy sets' kind) takes long; on a worker thread the event loop goes on
 * meanwhile. Also: all or nothing on a refused batch, a synchronous call refused while a batch is in
 * flight, and `close()` during one leaves no descriptor behind. Needs root.
 */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { NfTables } from '../../../src/kernel/netlink/nf-tables.js';
import type { SetElem } from '../../../src/kernel/netlink/nft-set-elem.js';
import { nftIn } from '../../../src/kernel/nft.js';
import { TestNetns } from './netns.js';

const notRoot = process.getuid?.() !== 0;
const INET = 1;
const TABLE = 'pwt';
const SET = 's';
/** Big enough that the kernel's commit takes tens of milliseconds at least. */
const N = 20_000;

/** Element i: the address 10.x.y.z (i) paired with every address, as a range. */
function elems(n: number): SetElem[] {
  return Array.from({ length: n }, (_, i) => {
    const a = [10, (i >> 16) & 255, (i >> 8) & 255, i & 255];
    return {
      key: Uint8Array.from([...a, 0, 0, 0, 0]),
      keyEnd: Uint8Array.from([...a, 255, 255, 255, 255]),
    };
  });
}

const openFds = () => readdirSync('/proc/self/fd').length;

describe('nf_tables batches on a worker thread', { skip: notRoot && 'needs root' }, () => {
  let ns: TestNetns | undefined;

  before(async () => {
    ns = TestNetns.create();
    await nftIn(ns.name).apply(
      `table inet ${TABLE} {\n  set ${SET} { type ipv4_addr . ipv4_addr; flags interval; }\n}\n`,
    );
  });
  after(() => ns?.delete());

  const open = () => (ns as TestNetns).enter(() => NfTables.open());

  test('the event loop goes on while the kernel commits a big batch; every element is there after', async () => {
    const nf = open();
    try {
      let ticks = 0;
      const timer = setInterval(() => ticks++, 1);
      const t0 = process.hrtime.bigint();
      try {
        await nf.changeElementsAsync(INET, TABLE, { remove: [], add: [{ set: SET, elems: elems(N) }] });
      } finally {
        clearInterval(timer);
      }
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      assert.equal(nf.listElements(INET, TABLE, SET).length, N);
      // A synchronous sendto would hold the event loop for the whole commit: no tick at all.
      assert.ok(ticks >= 2, `${ticks} timer ticks during a ${ms.toFixed(0)} ms batch`);
      await nf.changeElementsAsync(INET, TABLE, { remove: [{ set: SET, elems: elems(N) }], add: [] });
      assert.equal(nf.listElements(INET, TABLE, SET).length, 0);
    } finally {
      nf.close();
    }
  });

  test('a refused batch applies nothing and rejects with the kernel error, named after its message', async () => {
    const nf = open();
    try {
      await assert.rejects(
        nf.changeElementsAsync(INET, TABLE, {
          remove: [],
          add: [
            { set: SET, elems: elems(10) },
            { set: 'no-such-set', elems: elems(1) },
          ],
        }),
        /NFT_MSG_NEWSETELEM.*(ENOENT|No such file)/,
      );
      assert.equal(nf.listElements(INET, TABLE, SET).length, 0, 'all or nothing');
    } finally {
      nf.close();
    }
  });

  test('a synchronous call while a batch is in flight is refused; close() during one leaves no descriptor', async () => {
    const before = openFds();
    const nf = open();
    const pending = nf.changeElementsAsync(INET, TABLE, { remove: [], add: [{ set: SET, elems: elems(N) }] });
    // The batch is queued behind nothing: its sendto starts on a worker thread in this turn's microtasks.
    await Promise.resolve();
    await Promise.resolve();
    assert.throws(() => nf.listElements(INET, TABLE, SET), /a batch is in flight on this socket/);
    nf.close();
    // The kernel committed it (the worker was inside sendto); the acks are not read on a closed socket.
    await assert.rejects(pending, /closed/);
    assert.equal(openFds(), before, 'the descriptor is closed once the worker is done with it');
    const check = open();
    try {
      assert.equal(check.listElements(INET, TABLE, SET).length, N);
      check.changeElements(INET, TABLE, { remove: [{ set: SET, elems: elems(N) }], add: [] });
    } finally {
      check.close();
    }
  });
});
