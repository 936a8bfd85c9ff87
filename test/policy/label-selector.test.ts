import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { selectorKey, selectorMatches, selectsAll } from '../../src/policy/label-selector.js';
import type { LabelSelector, LabelSelectorRequirement } from '../../src/policy/model.js';

function sel(
  matchLabels: Record<string, string>,
  ...matchExpressions: LabelSelectorRequirement[]
): LabelSelector {
  return { matchLabels, matchExpressions };
}

describe('label selectors as Kubernetes matches them', () => {
  test('an empty selector selects everything, labelled or not', () => {
    assert.ok(selectsAll(sel({})));
    assert.ok(selectorMatches(sel({}), {}));
    assert.ok(selectorMatches(sel({}), { app: 'web' }));
  });

  test('matchLabels: every pair must be present with that value', () => {
    const s = sel({ app: 'web', tier: 'front' });
    assert.ok(selectorMatches(s, { app: 'web', tier: 'front', extra: 'x' }));
    assert.ok(!selectorMatches(s, { app: 'web' }));
    assert.ok(!selectorMatches(s, { app: 'web', tier: 'back' }));
    assert.ok(!selectsAll(s));
  });

  test('In: the key with one of the values', () => {
    const s = sel({}, { key: 'env', operator: 'In', values: ['prod', 'qa'] });
    assert.ok(selectorMatches(s, { env: 'qa' }));
    assert.ok(!selectorMatches(s, { env: 'dev' }));
    assert.ok(!selectorMatches(s, {}));
  });

  test('NotIn: a value outside the list, or no key at all', () => {
    const s = sel({}, { key: 'env', operator: 'NotIn', values: ['prod'] });
    assert.ok(selectorMatches(s, { env: 'dev' }));
    assert.ok(selectorMatches(s, {}), 'a pod without the key matches NotIn');
    assert.ok(!selectorMatches(s, { env: 'prod' }));
  });

  test('Exists and DoesNotExist look at the key only', () => {
    const exists = sel({}, { key: 'env', operator: 'Exists', values: [] });
    const absent = sel({}, { key: 'env', operator: 'DoesNotExist', values: [] });
    assert.ok(selectorMatches(exists, { env: '' }));
    assert.ok(!selectorMatches(exists, { other: 'env' }));
    assert.ok(selectorMatches(absent, { other: 'env' }));
    assert.ok(!selectorMatches(absent, { env: 'x' }));
  });

  test('all parts are ANDed', () => {
    const s = sel(
      { app: 'web' },
      { key: 'env', operator: 'In', values: ['prod'] },
      { key: 'canary', operator: 'DoesNotExist', values: [] },
    );
    assert.ok(selectorMatches(s, { app: 'web', env: 'prod' }));
    assert.ok(!selectorMatches(s, { app: 'web', env: 'prod', canary: 'true' }));
    assert.ok(!selectorMatches(s, { app: 'db', env: 'prod' }));
  });

  test('inherited object properties are not labels', () => {
    assert.ok(!selectorMatches(sel({}, { key: 'toString', operator: 'Exists', values: [] }), {}));
    assert.ok(selectorMatches(sel({}, { key: 'constructor', operator: 'DoesNotExist', values: [] }), {}));
  });

  test('the key is the same for equal selectors written differently', () => {
    const a = sel(
      { b: '2', a: '1' },
      { key: 'x', operator: 'In', values: ['q', 'p'] },
      { key: 'y', operator: 'Exists', values: [] },
    );
    const b = sel(
      { a: '1', b: '2' },
      { key: 'y', operator: 'Exists', values: [] },
      { key: 'x', operator: 'In', values: ['p', 'q', 'p'] },
    );
    assert.equal(selectorKey(a), selectorKey(b));
    assert.notEqual(selectorKey(a), selectorKey(sel({ a: '1', b: '2' })));
  });
});
