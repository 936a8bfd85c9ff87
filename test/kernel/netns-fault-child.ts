/**
 * Child process of netns-faults.test.ts: makes one `setns` of `inNetns` go wrong for real, then calls
 * it, and reports on stdout what happened if the process is still alive afterwards. The faults are
 * real kernel states, not mocks: the thread already in another namespace on entry, or a handle whose
 * descriptor number now means another namespace (dup2 over it, as a descriptor reused after a foreign
 * close would, failure 1) or no namespace at all.
 *
 * argv: MODE TARGET_PATH OTHER_PATH, MODE one of entry | inside | return-wrong | return-fails.
 */
import { openSync } from 'node:fs';
import koffi from 'koffi';
import { CLONE_NEWNET, setns } from '../../src/kernel/libc.js';
import { currentNetnsId, inNetns, NetnsHandle, sameNetns } from '../../src/kernel/netns.js';

const libc = koffi.load('libc.so.6');
const dup2 = libc.func('int dup2(int oldfd, int newfd)') as (a: number, b: number) => number;

const [mode, targetPath, otherPath] = process.argv.slice(2);
if (!mode || !targetPath || !otherPath) throw new Error('usage: MODE TARGET OTHER');

const home = NetnsHandle.current();
const target = NetnsHandle.open(targetPath);
const other = NetnsHandle.open(otherPath);
let ran = false;
const where = () => {
  const now = currentNetnsId();
  if (sameNetns(now, home.id)) return 'home';
  if (sameNetns(now, target.id)) return 'target';
  if (sameNetns(now, other.id)) return 'other';
  return 'unknown';
};
let ranIn = '';
const fn = () => {
  ran = true;
  ranIn = where();
  return 1;
};

let error = '';
try {
  if (mode === 'entry') {
    setns(other.fd, CLONE_NEWNET); // the thread is not home when inNetns is called
  } else if (mode === 'inside') {
    if (dup2(other.fd, target.fd) < 0) throw new Error('dup2');
  } else if (mode === 'return-wrong') {
    if (dup2(other.fd, home.fd) < 0) throw new Error('dup2');
  } else if (mode === 'return-fails') {
    const devnull = openSync('/dev/null', 'r');
    if (dup2(devnull, home.fd) < 0) throw new Error('dup2');
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
  inNetns(target, home, fn);
} catch (err) {
  error = err instanceof Error ? err.message : String(err);
}
// Still alive: say where the thread is and whether the callback ran.
process.stdout.write(`${JSON.stringify({ alive: true, ran, ranIn, now: where(), error })}\n`);
process.exit(0);
