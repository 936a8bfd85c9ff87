/** Invariant I1: entering a namespace is synchronous, verified on both ends, and refuses the agent's own. */
import assert from 'node:assert/strict';
import { closeSync, existsSync, openSync, readdirSync, readSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { must } from '../../bed/exec.js';
import { NamespaceSet, netnsPath } from '../../bed/namespaces.js';
import { PodwireError } from '../../src/base/errors.js';
import { currentNetnsId, inNetns, NetnsHandle, openPodNetns, sameNetns } from '../../src/kernel/netns.js';

const spaces = new NamespaceSet();
let target = '';
let home: NetnsHandle | undefined;

function mine(): NetnsHandle {
  if (!home) throw new Error('home handle not open');
  return home;
}

before(async () => {
  target = await spaces.add('netns');
  await must('ip', ['-n', target, 'link', 'add', 'pwtdummy0', 'type', 'veth', 'peer', 'name', 'pwtdummy1']);
  // A value set here, not one a new namespace copies from the host (forwarding follows ip_forward).
  await must('ip', [
    'netns',
    'exec',
    target,
    'sysctl',
    '-qw',
    'net.ipv4.neigh.pwtdummy0.retrans_time_ms=2000',
  ]);
  home = NetnsHandle.current();
  assert.ok(home);
});
after(async () => {
  try {
    home?.close();
  } finally {
    await spaces.cleanup();
  }
});

test('inNetns runs inside the target and returns home', () => {
  using t = NetnsHandle.open(netnsPath(target));
  const inside = inNetns(t, mine(), () => currentNetnsId());
  assert.ok(sameNetns(inside, t.id));
  assert.ok(!sameNetns(inside, mine().id));
  assert.ok(sameNetns(currentNetnsId(), mine().id));
});

test('a /proc/sys file opened inside stays bound to the target after returning', () => {
  using t = NetnsHandle.open(netnsPath(target));
  const key = '/proc/sys/net/ipv4/neigh/pwtdummy0/retrans_time_ms';
  assert.equal(existsSync(key), false, 'the dummy link exists only in the target');
  const fd = inNetns(t, mine(), () => openSync(key, 'r'));
  try {
    const buf = Buffer.alloc(8);
    assert.equal(
      buf
        .subarray(0, readSync(fd, buf, 0, 8, 0))
        .toString()
        .trim(),
      '2000',
    );
  } finally {
    closeSync(fd);
  }
});

test('a throwing callback still returns the thread home', () => {
  using t = NetnsHandle.open(netnsPath(target));
  assert.throws(() =>
    inNetns(t, mine(), () => {
      throw new Error('boom');
    }),
  );
  assert.ok(sameNetns(currentNetnsId(), mine().id));
});

test('a callback that returns a promise is refused, and the thread is home', () => {
  using t = NetnsHandle.open(netnsPath(target));
  // The type forbids it; the runtime check guards JavaScript callers and casts.
  const asyncFn = (async () => 1) as unknown as () => number;
  assert.throws(() => inNetns(t, mine(), asyncFn), /must be synchronous/);
  assert.ok(sameNetns(currentNetnsId(), mine().id));
});

test("the agent's own namespace is refused as a pod namespace", async () => {
  await assert.rejects(
    () => openPodNetns('/proc/self/ns/net', mine()),
    (err: unknown) =>
      err instanceof PodwireError && err.code === 'ERR_INVALID_ENV' && /node's own/.test(err.message),
  );
});

test('a missing path and a file that is not a network namespace are refused', () => {
  for (const path of ['/run/netns/pwt-does-not-exist', '/proc/self/ns/uts', '/etc/hostname']) {
    assert.throws(
      () => NetnsHandle.open(path),
      (err: unknown) =>
        err instanceof PodwireError && err.code === 'ERR_INVALID_ENV' && err.message.includes(path),
      path,
    );
  }
});

test('handles close their descriptor on every path (I2)', async () => {
  const before = readdirSync('/proc/self/fd').length;
  for (let i = 0; i < 200; i++) {
    using t = NetnsHandle.open(netnsPath(target));
    inNetns(t, mine(), () => 0);
    try {
      await openPodNetns('/proc/self/ns/net', mine());
    } catch {
      // refused, as tested above; what matters here is the descriptor count
    }
  }
  assert.equal(readdirSync('/proc/self/fd').length, before);
});

test('a closed handle refuses use', () => {
  const t = NetnsHandle.open(netnsPath(target));
  t.close();
  t.close();
  assert.throws(() => t.fd, /after close/);
});
