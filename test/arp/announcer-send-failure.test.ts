/**
 * I2 when a send fails: the packet socket of a frame whose send fails is closed at once, on the
 * synchronous path (`announceOnce`) and through the `Announcer`. The failure is real: the pod
 * interface is down, so the kernel refuses the frame (ENETDOWN). The baseline is the descriptor count
 * before the first send, with no warm-up round, so a single leaked socket shows. The last test brings
 * the interface up: a send that succeeds closes its socket too.
 */
import assert from 'node:assert/strict';
import { readdirSync, readlinkSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ipJson, must } from '../../bed/exec.js';
import { NamespaceSet, netnsPath } from '../../bed/namespaces.js';
import { Announcer, announceOnce } from '../../src/arp/announcer.js';
import { KernelError } from '../../src/kernel/libc.js';
import { NetnsHandle } from '../../src/kernel/netns.js';

const spaces = new NamespaceSet();
let pod = '';
let ifindex = 0;
let home: NetnsHandle;

before(async () => {
  pod = await spaces.add('garp-fail');
  // One end of a veth, left down: a packet socket bound to it cannot send (ENETDOWN).
  await must('ip', ['-n', pod, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth1']);
  const [l] = await ipJson<Array<{ ifindex: number }>>(pod, ['link', 'show', 'eth0']);
  ifindex = l?.ifindex ?? 0;
  home = NetnsHandle.current();
});
after(async () => {
  home?.close();
  await spaces.cleanup();
});

/** The packet sockets this process holds: /proc/self/fd entries that are sockets, by inode. */
function sockets(): string[] {
  const out: string[] = [];
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const l = readlinkSync(`/proc/self/fd/${fd}`);
      if (l.startsWith('socket:')) out.push(l);
    } catch {
      // the directory's own descriptor, closed by the time it is read
    }
  }
  return out.sort();
}

test('announceOnce: a send that fails reports the kernel error and leaves no socket open', async () => {
  using netns = NetnsHandle.open(netnsPath(pod));
  const baseline = sockets();
  for (let i = 0; i < 5; i++) {
    const { sent, closed } = announceOnce({
      netns,
      home,
      ifindex,
      mac: '0a:58:0a:f4:00:05',
      ipv4: '10.244.0.5',
    });
    assert.equal(sent, 0);
    await assert.rejects(
      closed,
      (err: unknown) => err instanceof KernelError && /ENETDOWN/.test(err.message),
    );
  }
  assert.deepEqual(sockets(), baseline, 'every socket of a failed send is closed');
});

test('Announcer: a failing first round is reported through onError and leaves no socket open', async () => {
  const errors: unknown[] = [];
  const announcer = new Announcer({ rounds: 3, intervalMs: 10 }, (_key, err) => errors.push(err));
  const baseline = sockets();
  for (let i = 0; i < 5; i++) {
    announcer.start(`k${i}`, {
      netns: NetnsHandle.open(netnsPath(pod)),
      home,
      ifindex,
      mac: '0a:58:0a:f4:00:06',
      ipv4: '10.244.0.6',
      ipv6: 'fd00::6',
    });
  }
  await announcer.cancelAll();
  await sleep(50);
  assert.equal(errors.length, 5, 'each pod reports its failed round once');
  assert.deepEqual(sockets(), baseline, 'no packet socket and no netns handle left open');
});

test('announceOnce: sends that succeed leave no socket open once closed settles', async () => {
  await must('ip', ['-n', pod, 'link', 'set', 'eth1', 'up']);
  await must('ip', ['-n', pod, 'link', 'set', 'eth0', 'up']);
  using netns = NetnsHandle.open(netnsPath(pod));
  const baseline = sockets();
  for (let i = 0; i < 5; i++) {
    const { sent, closed } = announceOnce({
      netns,
      home,
      ifindex,
      mac: '0a:58:0a:f4:00:07',
      ipv4: '10.244.0.7',
      ipv6: 'fd00::7',
    });
    assert.equal(sent, 2);
    await closed;
  }
  assert.deepEqual(sockets(), baseline, 'every socket of a sent frame is closed');
});
