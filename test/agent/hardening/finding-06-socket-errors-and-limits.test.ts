/**
 * Issue 15, finding 6: the CNI and metrics servers dropped their only 'error' listener after listen,
 * so a failed accept (EMFILE) would crash the agent; the CNI server had no read deadline and no
 * connection cap, and the scheduler's wait queue had no bound. On this libuv an EMFILE accept does
 * not reach Node (libuv closes the waiting connections with a reserved descriptor), so the first
 * test passes on the old code too: it shows the agent survives and serves on; the listener stays as
 * the defence for errors libuv does pass on. The other two fail on the old code. Depends on:
 * - `listenUnix(..., onError)` keeping the listener (src/agent/unix-listen.ts, `server.on('error', onError)`);
 * - `REQUEST_READ_TIMEOUT_MS` and `maxConnections` in src/agent/cni/cni-server.ts;
 * - `maxPending` in src/agent/cni/scheduler.ts.
 */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { run } from '../../../bed/exec.js';
import { TestNode } from '../../../bed/node.js';
import { REQUEST_READ_TIMEOUT_MS } from '../../../src/agent/cni/cni-server.js';
import { Scheduler } from '../../../src/agent/cni/scheduler.js';
import { PodwireError } from '../../../src/base/errors.js';

async function open(path: string, n: number): Promise<Socket[]> {
  const out: Socket[] = [];
  for (let i = 0; i < n; i++) {
    const s = connect(path);
    s.on('error', () => undefined); // refused or reset once the agent is out of descriptors
    out.push(s);
  }
  await sleep(300);
  return out;
}

describe('finding 6: the CNI socket under pressure', () => {
  const node = new TestNode({ podCIDRs: ['10.244.61.0/24'] });
  before(() => node.setup());
  after(() => node.cleanup());

  test('EMFILE on accept: the agent survives and serves on', async () => {
    const pid = node.agentPid;
    const baseline = node.openFds().length;
    // Room for a few more descriptors only: the next accepts fail with EMFILE.
    await run('prlimit', ['--pid', String(pid), `--nofile=${baseline + 4}:1048576`]);
    const socks = await open(node.socket, 30);
    try {
      assert.ok(node.agent && node.agent.exitCode === null, `the agent is alive: ${node.logs.slice(-400)}`);
    } finally {
      for (const s of socks) s.destroy();
      await run('prlimit', ['--pid', String(pid), '--nofile=1048576:1048576']);
    }
    const pod = await node.addPod('emfile');
    const add = await node.cni({ command: 'ADD', containerId: 'emfile', netns: pod });
    assert.equal(add.code, 0, add.stdout);
    assert.equal((await node.cni({ command: 'DEL', containerId: 'emfile', netns: pod })).code, 0);
  });

  test('idle connections do not stop other calls and are closed after the read deadline', async () => {
    const baseline = node.openFds().length;
    const socks = await open(node.socket, 300);
    try {
      const pod = await node.addPod('idle');
      const add = await node.cni({ command: 'ADD', containerId: 'idle', netns: pod });
      assert.equal(add.code, 0, add.stdout);
      assert.equal((await node.cni({ command: 'DEL', containerId: 'idle', netns: pod })).code, 0);
      // The 300 idle connections are the agent's to close (the test keeps its ends open).
      const deadline = Date.now() + REQUEST_READ_TIMEOUT_MS + 3000;
      while (node.openFds().length > baseline && Date.now() < deadline) await sleep(100);
      assert.ok(
        node.openFds().length <= baseline,
        `every idle connection was closed: ${node.openFds().length}`,
      );
    } finally {
      for (const s of socks) s.destroy();
    }
  });
});

test('finding 6: the scheduler refuses calls beyond maxPending with ERR_TRY_AGAIN', async () => {
  const s = new Scheduler(1, undefined, 3);
  let release!: () => void;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  const held = [s.run('a', () => gate), s.run('b', () => gate), s.run('a', () => gate)];
  await assert.rejects(
    s.run('c', async () => 1),
    (err: unknown) => err instanceof PodwireError && err.code === 'ERR_TRY_AGAIN',
  );
  release();
  await Promise.all(held);
  assert.equal(await s.run('c', async () => 2), 2, 'accepted again once the queue drained');
});
