/**
 * I1 under fault injection: each of `inNetns`'s namespace checks meets a `setns` that really goes
 * wrong, in a child process (netns-fault-child.ts) so that an exit is observable and this test's
 * cleanup still runs. Each case fails if its check is removed (see `npm run mutate`).
 *
 * - entry: the thread is already in another namespace: the process exits 70 before entering anything;
 * - inside: the target handle's descriptor now names another namespace: the callback never runs, the
 *   call throws, the thread is home;
 * - return, wrong namespace: the home handle's descriptor names another namespace: exit 70;
 * - return, setns fails: the home handle's descriptor is no namespace (EINVAL): exit 70.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { NamespaceSet, netnsPath } from '../../bed/namespaces.js';

const CHILD = join(import.meta.dirname, 'netns-fault-child.js');
const spaces = new NamespaceSet();
let target = '';
let other = '';

before(async () => {
  target = await spaces.add('nsfault-t');
  other = await spaces.add('nsfault-o');
});
after(() => spaces.cleanup());

interface ChildOutcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runChild(mode: string): Promise<ChildOutcome> {
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, [CHILD, mode, netnsPath(target), netnsPath(other)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    c.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    c.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const timer = setTimeout(() => c.kill('SIGKILL'), 20_000);
    c.on('error', reject);
    c.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

function assertFatalExit(r: ChildOutcome, why: RegExp): void {
  assert.equal(r.code, 70, `the process exits 70; it went on with: ${r.stdout}${r.stderr}`);
  assert.equal(r.stdout, '', 'nothing ran after the failed check');
  const fatal = r.stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: string; msg: string; err: string });
  assert.equal(fatal.length, 1, r.stderr);
  assert.equal(fatal[0]?.level, 'fatal');
  assert.match(fatal[0]?.msg ?? '', /cannot return to the agent network namespace/);
  assert.match(fatal[0]?.err ?? '', why);
}

test('entry: a thread that is not home when inNetns is called: the process exits 70', async () => {
  assertFatalExit(await runChild('entry'), /not in its home namespace on entry/);
});

test('inside: setns lands in another namespace: refused, the callback never runs, the thread is home', async () => {
  const r = await runChild('inside');
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { ran: boolean; ranIn: string; now: string; error: string };
  assert.equal(out.ran, false, `the callback ran in the ${out.ranIn} namespace`);
  assert.match(out.error, /landed in another namespace/);
  assert.equal(out.now, 'home');
});

test('return: setns back lands in another namespace: the process exits 70', async () => {
  assertFatalExit(await runChild('return-wrong'), /differs from home after setns/);
});

test('return: setns back fails: the process exits 70', async () => {
  // The kernel's own error, not the inode check after it: each of the two guards must act alone.
  assertFatalExit(await runChild('return-fails'), /setns: EINVAL/);
});
