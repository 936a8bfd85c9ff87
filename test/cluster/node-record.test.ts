import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { diffNodes, nodeNameProblem, nodesEqual, parseNodeRecord } from '../../src/cluster/node-record.js';
import type { StoredNode } from '../../src/cluster/store.js';
import { isCode } from './watch-log.js';

const strict = { strictKeys: true };

describe('node records', () => {
  test('canonical form', () => {
    assert.deepEqual(
      parseNodeRecord(
        {
          name: 'node-1.example',
          underlayIP: 'FD00::0001',
          podCIDRs: ['FD00:1::/64', '10.1.0.0/24'],
          vtepMac: '0A:58:00:00:00:01',
          labels: {},
        },
        'r',
        strict,
      ),
      {
        name: 'node-1.example',
        underlayIP: 'fd00::1',
        podCIDRs: ['fd00:1::/64', '10.1.0.0/24'],
        vtepMac: '0a:58:00:00:00:01',
        labels: {},
      },
    );
  });

  test('names: DNS-1123 subdomains only', () => {
    for (const good of ['a', 'node-1', 'n.example.com', '0'])
      assert.equal(nodeNameProblem(good), undefined, good);
    for (const bad of ['', 'A', '-a', 'a-', 'a_b', 'a/b', 'a..b', 'x'.repeat(254), 5]) {
      assert.notEqual(nodeNameProblem(bad), undefined, String(bad));
    }
  });

  test('stored data tolerates unknown keys; configuration does not', () => {
    const value = { name: 'a', underlayIP: '10.0.0.1', podCIDRs: [], future: 1 };
    assert.deepEqual(parseNodeRecord(value, 'k', { strictKeys: false }), {
      name: 'a',
      underlayIP: '10.0.0.1',
      podCIDRs: [],
    });
    assert.throws(() => parseNodeRecord(value, 'k', strict), isCode('ERR_STORE', /^k\.future: unknown key/));
    assert.throws(() => parseNodeRecord([], 'k', strict), isCode('ERR_STORE', /^k: must be a mapping/));
    assert.throws(
      () => parseNodeRecord({ name: 'a', underlayIP: '10.0.0.1', podCIDRs: 'x' }, 'k', strict),
      isCode('ERR_STORE', /k\.podCIDRs: must be a list/),
    );
  });

  test('diffNodes turns any known set into any next set, and reports each change once', () => {
    const names = fc.constantFrom('a', 'b', 'c', 'd', 'e');
    const set = fc.uniqueArray(fc.record({ name: names, v: fc.integer({ min: 1, max: 3 }) }), {
      selector: (x) => x.name,
    });
    const stored = (xs: { name: string; v: number }[]): StoredNode[] =>
      xs.map(({ name, v }) => ({
        node: { name, underlayIP: `10.0.0.${v}`, podCIDRs: [] },
        version: String(v),
      }));
    fc.assert(
      fc.property(set, set, (before, next) => {
        const known = new Map(stored(before).map((s) => [s.node.name, s]));
        const target = stored(next);
        const events = diffNodes(known, target, '9');
        assert.deepEqual([...known.keys()].sort(), target.map((s) => s.node.name).sort());
        for (const s of target) assert.ok(nodesEqual(known.get(s.node.name)?.node ?? s.node, s.node));
        const changed = target.filter(
          (s) => !before.some((b) => b.name === s.node.name && String(b.v) === s.version),
        );
        const gone = before.filter((b) => !next.some((n) => n.name === b.name));
        assert.equal(events.filter((e) => e.type === 'put').length, changed.length);
        assert.deepEqual(
          events
            .filter((e) => e.type === 'delete')
            .map((e) => e.node.name)
            .sort(),
          gone.map((g) => g.name).sort(),
        );
        assert.deepEqual(diffNodes(known, target, '10'), []);
      }),
      { numRuns: 200 },
    );
  });
});
