/**
 * Random label selectors for the policy model tests (the compiler's and the datapaths'): up to two
 * matchLabels and up to two matchExpressions of every operator, over the given keys and values.
 */
import fc from 'fast-check';
import type { LabelSelector } from '../../src/policy/model.js';

export function labelSelectorArbitrary(keys: string[], values: string[]): fc.Arbitrary<LabelSelector> {
  return fc.record({
    matchLabels: fc.dictionary(fc.constantFrom(...keys), fc.constantFrom(...values), { maxKeys: 2 }),
    matchExpressions: fc.array(
      fc.oneof(
        fc.record({
          key: fc.constantFrom(...keys),
          operator: fc.constantFrom('In' as const, 'NotIn' as const),
          values: fc.uniqueArray(fc.constantFrom(...values), { minLength: 1, maxLength: 2 }),
        }),
        fc.record({
          key: fc.constantFrom(...keys),
          operator: fc.constantFrom('Exists' as const, 'DoesNotExist' as const),
          values: fc.constant([] as string[]),
        }),
      ),
      { maxLength: 2 },
    ),
  });
}
