/**
 * Issue 15, finding 8: after an async koffi call (sendtoAsync, closeAsync in src/kernel/libc.ts) the
 * errno is read in the completion callback on the main thread. That is right only because koffi (3.2
 * and later; package.json asks for ^3.3.4) hands the worker thread's errno to the callback; with an
 * older koffi, or with errno read anywhere later than the callback, the message would name whatever
 * the main thread's last call left. This test sets the main thread's errno to something else while
 * the call is on its worker and checks the error names the worker's (EBADF). It passes on 0a550f2
 * too: the finding was not a bug with the koffi in use, and this pins the assumption.
 */
import assert from 'node:assert/strict';
import { constants } from 'node:os';
import { test } from 'node:test';
import koffi from 'koffi';
import { closeAsync, KernelError, sendtoAsync } from '../../../src/kernel/libc.js';

/** A descriptor number no process here has open. */
const NOT_OPEN = 987_654;

test("finding 8: an async call that fails names its own errno, not the main thread's", async () => {
  for (const [name, call] of [
    ['close', () => closeAsync(NOT_OPEN)],
    ['sendto', () => sendtoAsync(NOT_OPEN, Buffer.alloc(8), 0, null)],
  ] as const) {
    const pending = call();
    koffi.errno(constants.errno.EPERM); // what the main thread's own last call might have left
    await assert.rejects(
      pending,
      (err: unknown) =>
        err instanceof KernelError && err.errno === constants.errno.EBADF && err.syscall === name,
      name,
    );
  }
});
