/** Shared assertion for the cni tests: a PodwireError with the expected code whose message names a field. */

import assert from 'node:assert/strict';
import { PodwireError, type PodwireErrorCode } from '../../src/base/errors.js';

export function assertCniError(fn: () => unknown, code: PodwireErrorCode, field: string): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof PodwireError, `expected a PodwireError, got ${String(err)}`);
    assert.equal(err.code, code, `code for message ${JSON.stringify(err.message)}`);
    assert.ok(err.message.includes(field), `message ${JSON.stringify(err.message)} should name ${field}`);
    return true;
  });
}
