/**
 * A pod guarded anew (reconcile re-adds it with other addresses, a MAC or pool status) is never
 * unguarded in between: `replacePodGuard` adds the new identity's elements first, then deletes only
 * the old ones the new one lacks (src/datapath/linux-bridge/pod-guard.ts). A review found the old
 * remove-then-add: between its two transactions the port was in no `pod_ports`, so neither the
 * prerouting guard nor bridging mode's forward chain judged its frames.
 *
 * The order at the NfTables seam (a recorder), and the end state in a real kernel's sets: fails if
 * the function removes before it adds, or leaves an old element behind.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { NamespaceSet, netnsPath } from '../../bed/namespaces.js';
import {
  addPodGuard,
  missingPodGuard,
  POD_GUARD_FAMILY,
  POD_GUARD_TABLE,
  type PodIdentity,
  podGuardScript,
  replacePodGuard,
} from '../../src/datapath/linux-bridge/pod-guard.js';
import type { NfTables, SetKeys } from '../../src/kernel/netlink/nf-tables.js';
import { NfTables as RealNfTables } from '../../src/kernel/netlink/nf-tables.js';
import { inNetns, NetnsHandle } from '../../src/kernel/netns.js';
import { nftIn } from '../../src/kernel/nft.js';

const OLD: PodIdentity = { hostIfname: 'pwtrepl0', mac: '0a:58:0a:f4:00:05', ips: ['10.244.0.5'] };
const NEXT: PodIdentity = {
  hostIfname: 'pwtrepl0',
  mac: '0a:58:c0:00:02:65',
  ips: ['192.0.2.101'],
  underlay: true,
};

test('the new elements go in first; only what the new identity lacks goes after', () => {
  const calls: Array<{ op: string; sets: string[] }> = [];
  const nf = {
    addElements: (_f: number, _t: string, groups: SetKeys[]) =>
      calls.push({ op: 'add', sets: groups.filter((g) => g.keys.length > 0).map((g) => g.set) }),
    deleteElements: (_f: number, _t: string, groups: SetKeys[]) =>
      calls.push({ op: 'delete', sets: groups.map((g) => g.set) }),
  } as unknown as NfTables;
  replacePodGuard(nf, OLD, NEXT);
  assert.equal(calls[0]?.op, 'add');
  assert.ok(calls[0]?.sets.includes('pod_ports') && calls[0]?.sets.includes('underlay_pods'));
  assert.deepEqual(
    calls.slice(1).map((c) => c.op),
    ['delete'],
  );
  assert.ok(!calls[1]?.sets.includes('pod_ports'), `the port stays guarded: ${JSON.stringify(calls)}`);
});

const spaces = new NamespaceSet();
let ns = '';
before(async () => {
  ns = await spaces.add('repl');
  await nftIn(ns).apply(podGuardScript());
});
after(() => spaces.cleanup());

test('in the kernel: the new identity whole, nothing of the old one left', () => {
  using home = NetnsHandle.current();
  using target = NetnsHandle.open(netnsPath(ns));
  using nf = inNetns(target, home, () => RealNfTables.open());
  addPodGuard(nf, OLD);
  assert.equal(missingPodGuard(nf, OLD), undefined);
  replacePodGuard(nf, OLD, NEXT);
  assert.equal(missingPodGuard(nf, NEXT), undefined);
  assert.equal(nf.listElements(POD_GUARD_FAMILY, POD_GUARD_TABLE, 'pod_ports').length, 1);
  assert.equal(nf.listElements(POD_GUARD_FAMILY, POD_GUARD_TABLE, 'underlay_pods').length, 1);
  for (const set of ['pod_arp', 'pod_ip4'])
    assert.equal(
      nf.listElements(POD_GUARD_FAMILY, POD_GUARD_TABLE, set).length,
      set === 'pod_arp' ? 2 : 1,
      set,
    );
  assert.notEqual(missingPodGuard(nf, OLD), undefined, 'the old identity is gone');
});
