/** The JSON stream splitter: any sequence of JSON texts, cut anywhere, comes out whole and in order. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { PodwireError } from '../../../src/base/errors.js';
import { JsonStreamSplitter } from '../../../src/datapath/ovs/json-stream.js';

/** JSON-RPC-shaped messages whose strings hold braces, quotes, escapes and multi-byte characters. */
const tricky = fc.string({
  unit: fc.constantFrom('{', '}', '[', ']', '"', '\\', 'a', 'é', '€', '𝄞', ' ', '\n'),
});
const message = fc.oneof(
  fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 4 }),
  fc.record({ id: fc.nat(), method: tricky, params: fc.array(tricky, { maxLength: 3 }) }),
  fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 4 }),
);

test('messages cut at arbitrary byte boundaries are reassembled in order', () => {
  fc.assert(
    fc.property(
      fc.array(message, { minLength: 1, maxLength: 6 }),
      fc.array(fc.nat(), { maxLength: 8 }),
      fc.constantFrom('', ' ', '\n'),
      (msgs, cuts, sep) => {
        const bytes = Buffer.from(msgs.map((m) => JSON.stringify(m)).join(sep));
        const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
        const splitter = new JsonStreamSplitter();
        const got: unknown[] = [];
        let from = 0;
        for (const p of [...points, bytes.length]) {
          got.push(...splitter.push(bytes.subarray(from, p)));
          from = p;
        }
        assert.deepEqual(got, JSON.parse(JSON.stringify(msgs)));
        assert.equal(splitter.idle, true);
      },
    ),
    { numRuns: 200 },
  );
});

test('a byte-by-byte feed yields each message when its last byte arrives', () => {
  const text = '{"id":1,"result":["a}b"]}[{"x":"\\"}"}]';
  const splitter = new JsonStreamSplitter();
  const seen: Array<[number, unknown]> = [];
  Buffer.from(text).forEach((b, i) => {
    for (const m of splitter.push(Buffer.from([b]))) seen.push([i, m]);
  });
  assert.deepEqual(seen, [
    [24, { id: 1, result: ['a}b'] }],
    [text.length - 1, [{ x: '"}' }]],
  ]);
});

test('a scalar at the top level is refused', () => {
  assert.throws(
    () => new JsonStreamSplitter().push(Buffer.from('42')),
    (e: unknown) => e instanceof PodwireError && e.code === 'ERR_DECODE',
  );
});
