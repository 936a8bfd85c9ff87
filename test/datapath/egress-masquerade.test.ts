/**
 * The egress masquerade table (src/datapath/egress-masquerade.ts) in a throwaway namespace: the
 * script nft accepts, replacing it twice leaves one table, the kept set changes without touching the
 * rules, `ensure` (and a kept-set change) puts a removed table back, and the listing is read back
 * (kept set, completeness).
 * Traffic through it is tested in test/multinode/egress.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { must } from '../../bed/exec.js';
import { NamespaceSet } from '../../bed/namespaces.js';
import {
  disjointPrefixes,
  EGRESS_NAT_TABLE,
  EgressMasquerade,
  readEgressTable,
} from '../../src/datapath/egress-masquerade.js';
import { nftIn } from '../../src/kernel/nft.js';

test('disjointPrefixes: one family, canonical, nested and repeated prefixes dropped, sorted', () => {
  const list = [
    '10.250.1.0/24',
    '10.250.0.0/16',
    '192.168.0.0/24',
    '10.250.0.0/16',
    'fd00::/8',
    'junk',
    '10.1.0.0/16',
  ];
  assert.deepEqual(disjointPrefixes(list, 4), ['10.1.0.0/16', '10.250.0.0/16', '192.168.0.0/24']);
  assert.deepEqual(disjointPrefixes(list, 6), ['fd00::/8']);
  assert.deepEqual(disjointPrefixes([], 4), []);
});

describe('egress masquerade table in a namespace', () => {
  const spaces = new NamespaceSet();
  let ns = '';
  before(async () => {
    ns = await spaces.add('nat');
  });
  after(() => spaces.cleanup());

  test('installed twice: one table; kept set replaced alone; ensure reinstates; removed', async () => {
    const nft = nftIn(ns);
    const masq = new EgressMasquerade(nft, {
      sources: ['10.250.0.0/24', 'fd00:10:250::/64'],
      keep: ['10.250.0.0/24', '10.250.1.0/24', '192.168.0.0/16'],
    });
    await masq.install();
    await masq.install();
    const tables = (await must('ip', ['netns', 'exec', ns, 'nft', 'list', 'tables'])).trim().split('\n');
    assert.deepEqual(tables, [`table inet ${EGRESS_NAT_TABLE}`]);
    let t = await readEgressTable(nft);
    assert.ok(t?.complete);
    assert.deepEqual(t?.keep.sort(), ['10.250.0.0/24', '10.250.1.0/24', '192.168.0.0/16']);

    const handlesBefore = await must('ip', [
      'netns',
      'exec',
      ns,
      'nft',
      '-a',
      'list',
      'chain',
      'inet',
      EGRESS_NAT_TABLE,
      'postrouting',
    ]);
    await masq.setKeep(['10.250.0.0/16', '10.250.2.0/24', 'fd00:10:250::/56']);
    t = await readEgressTable(nft);
    assert.deepEqual(t?.keep.sort(), ['10.250.0.0/16', 'fd00:10:250::/56']);
    const handlesAfter = await must('ip', [
      'netns',
      'exec',
      ns,
      'nft',
      '-a',
      'list',
      'chain',
      'inet',
      EGRESS_NAT_TABLE,
      'postrouting',
    ]);
    assert.equal(handlesAfter, handlesBefore, 'a kept-set change leaves the rules (and their handles) alone');

    assert.equal(await masq.ensure(), false, 'nothing to do when the table is complete');
    // The drop of pods' invalid packets (decision 34) is part of a complete table.
    await must('ip', ['netns', 'exec', ns, 'nft', 'flush', 'chain', 'inet', EGRESS_NAT_TABLE, 'forward']);
    assert.equal(await masq.ensure(), true, 'a flushed forward chain is put back');
    assert.ok((await readEgressTable(nft))?.complete);
    await must('ip', ['netns', 'exec', ns, 'nft', 'delete', 'table', 'inet', EGRESS_NAT_TABLE]);
    assert.equal(await readEgressTable(nft), undefined);
    assert.equal(await masq.ensure(), true);
    t = await readEgressTable(nft);
    assert.ok(t?.complete);
    assert.deepEqual(
      t?.keep.sort(),
      ['10.250.0.0/16', 'fd00:10:250::/56'],
      'reinstated with the last kept set',
    );

    // A kept-set change while the table is gone puts the whole table back, with the new set.
    await must('ip', ['netns', 'exec', ns, 'nft', 'delete', 'table', 'inet', EGRESS_NAT_TABLE]);
    await masq.setKeep(['10.250.0.0/16']);
    t = await readEgressTable(nft);
    assert.ok(t?.complete);
    assert.deepEqual(t?.keep, ['10.250.0.0/16']);

    await masq.remove();
    await masq.remove();
    assert.equal(await readEgressTable(nft), undefined);
  });
});
