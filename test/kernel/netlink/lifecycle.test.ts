/**
 * Ownership and namespace binding of Rtnetlink (I1, I2): descriptors are returned, close is
 * idempotent, calls after close fail with a named error, and a client keeps acting in the namespace it
 * was opened in. Needs root.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { NetlinkClosedError } from '../../../src/kernel/netlink/errors.js';
import { Rtnetlink } from '../../../src/kernel/netlink/rtnetlink.js';
import { TestNetns } from './netns.js';

const notRoot = process.getuid?.() !== 0;

function openDescriptors(): number {
  return readdirSync('/proc/self/fd').length;
}

describe('Rtnetlink lifecycle', { skip: notRoot && 'needs root' }, () => {
  let a: TestNetns | undefined;
  let b: TestNetns | undefined;

  before(() => {
    a = TestNetns.create();
    b = TestNetns.create();
  });

  after(() => {
    try {
      a?.delete();
    } finally {
      b?.delete();
    }
  });

  test('opening and closing 200 clients leaves the descriptor count unchanged', () => {
    assert.ok(a);
    const ns = a;
    const baseline = openDescriptors();
    ns.enter(() => {
      for (let i = 0; i < 200; i++) Rtnetlink.open().close();
      for (let i = 0; i < 200; i++) {
        using nl = Rtnetlink.open();
        assert.ok(nl.links().length >= 1);
      }
    });
    assert.equal(openDescriptors(), baseline);
  });

  test('close is idempotent and every later call throws NetlinkClosedError', () => {
    assert.ok(a);
    const nl = a.enter(() => Rtnetlink.open());
    nl.close();
    nl.close();
    nl[Symbol.dispose]();
    assert.equal(nl.closed, true);
    const calls: [string, () => unknown][] = [
      ['links', () => nl.links()],
      ['linkByName', () => nl.linkByName('lo')],
      ['linkByIndex', () => nl.linkByIndex(1)],
      ['addVeth', () => nl.addVeth({ name: 'x', peerName: 'y', mtu: 1500 })],
      ['addBridge', () => nl.addBridge({ name: 'x', mtu: 1500 })],
      ['setLinkUp', () => nl.setLinkUp(1)],
      ['setLinkDown', () => nl.setLinkDown(1)],
      ['setMaster', () => nl.setMaster(1, 2)],
      ['setMtu', () => nl.setMtu(1, 1500)],
      ['setMac', () => nl.setMac(1, '02:00:00:00:00:01')],
      ['deleteLink', () => nl.deleteLink(1)],
      ['deleteLinkByName', () => nl.deleteLinkByName('x')],
      ['addAddress', () => nl.addAddress(1, { address: '10.0.0.1', prefixLength: 8 })],
      ['deleteAddress', () => nl.deleteAddress(1, { address: '10.0.0.1', prefixLength: 8 })],
      ['addresses', () => nl.addresses()],
      ['addRoute', () => nl.addRoute({ dst: '10.0.0.0/8', oif: 1 })],
      ['deleteRoute', () => nl.deleteRoute({ dst: '10.0.0.0/8', oif: 1 })],
      ['routes', () => nl.routes({ family: 2 })],
    ];
    for (const [name, call] of calls) assert.throws(call, NetlinkClosedError, name);
  });

  test('a client acts in the namespace it was opened in, after the thread has switched back', () => {
    assert.ok(a && b);
    const nsA = a;
    const nsB = b;
    using inA = nsA.enter(() => Rtnetlink.open());
    using inB = nsB.enter(() => Rtnetlink.open());
    // The same name in both namespaces: each socket reaches only its own.
    const brA = inA.addBridge({ name: 'pw-bind', mtu: 1500, mac: '02:00:00:00:00:aa' });
    const brB = inB.addBridge({ name: 'pw-bind', mtu: 1500, mac: '02:00:00:00:00:bb' });
    assert.equal(
      nsA.ipJson<{ address: string }[]>('link', 'show', 'pw-bind')[0]?.address,
      '02:00:00:00:00:aa',
    );
    assert.equal(
      nsB.ipJson<{ address: string }[]>('link', 'show', 'pw-bind')[0]?.address,
      '02:00:00:00:00:bb',
    );
    assert.equal(inA.linkByIndex(brA.index)?.mac, '02:00:00:00:00:aa');
    assert.equal(inB.linkByIndex(brB.index)?.mac, '02:00:00:00:00:bb');
    // Read-only look at the machine's own namespace: nothing appeared there.
    assert.throws(() => execFileSync('ip', ['link', 'show', 'pw-bind'], { stdio: 'pipe' }));
  });
});
