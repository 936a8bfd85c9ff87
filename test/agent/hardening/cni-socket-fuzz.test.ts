/**
 * Issue 15, "a fuzz run of the CNI socket itself" (beside finding 6, whose test covers EMFILE on
 * accept and 300 idle connections): truncated frames, huge lengths, oversized requests, slow writers,
 * random frames and 1000 idle connections, sent straight to the agent's socket (no relay). Throughout,
 * the agent answers every frame it can read with one exit-code byte and a CNI error, keeps serving
 * real calls, and its descriptor count comes back to where it was.
 *
 * Depends on, in src/agent/cni/cni-server.ts: `REQUEST_READ_TIMEOUT_MS` as a deadline for the whole
 * request from the connection's accept (`const deadline = setTimeout(...)` in `#serve`). The old code
 * had the socket's inactivity timeout, which a writer trickling a byte every 500 ms never meets: the
 * slow-writer test fails on it (held until it was done, ~20 s). An oversized request is answered as
 * soon as it passes the limit; the agent then ends its side and reads on, dropping the rest, until the
 * sender's EOF or the same deadline (the `if (size > MAX_REQUEST) return` in the 'data' handler, and
 * no destroy after the answer: closing with the request unread made the relay fail its send with
 * EPIPE and report 11 instead; see test/relay/relay.test.ts): that test fails on the old code, which
 * closed right after its answer. The others passed on the old code too.
 */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { TestNode } from '../../../bed/node.js';
import { encodeRequest, REQUEST_READ_TIMEOUT_MS } from '../../../src/agent/cni/cni-server.js';

interface Answer {
  /** Everything the agent sent before it closed the connection. */
  bytes: Buffer;
  /** How the connection ended: the agent's end, or the test's deadline. */
  ended: 'closed' | 'timeout';
  ms: number;
  /** When the first answer byte arrived (undefined: none did). */
  firstMs: number | undefined;
}

/**
 * Connects, writes `chunks` (with `gapMs` between them), half-closes when `end`, and collects the
 * answer until the agent closes the connection or `timeoutMs` passes.
 */
function exchange(
  path: string,
  chunks: Buffer[],
  opts: { end?: boolean; gapMs?: number; timeoutMs?: number; halfOpen?: boolean } = {},
): Promise<Answer> {
  const { end = true, gapMs = 0, timeoutMs = REQUEST_READ_TIMEOUT_MS * 3, halfOpen = false } = opts;
  const started = performance.now();
  return new Promise((resolve) => {
    // halfOpen: the agent's end of its answer does not end the test's side, which writes on.
    const sock = connect({ path, allowHalfOpen: halfOpen });
    const got: Buffer[] = [];
    let done = false;
    let firstMs: number | undefined;
    const finish = (ended: Answer['ended']) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve({ bytes: Buffer.concat(got), ended, ms: performance.now() - started, firstMs });
    };
    const timer = setTimeout(() => finish('timeout'), timeoutMs);
    sock.on('data', (d: Buffer) => {
      firstMs ??= performance.now() - started;
      got.push(d);
    });
    sock.on('error', () => finish('closed')); // EPIPE / ECONNRESET: the agent closed it
    sock.on('close', () => finish('closed'));
    sock.on('connect', async () => {
      for (const [i, c] of chunks.entries()) {
        if (done || sock.destroyed) return;
        if (i > 0 && gapMs > 0) await sleep(gapMs);
        if (done || sock.destroyed) return;
        sock.write(c);
      }
      if (end && !done && !sock.destroyed) sock.end();
    });
  });
}

/** A refusal: exit code 1 and a CNI error object. */
function assertCniError(a: Answer, what: string): void {
  assert.equal(a.ended, 'closed', `${what}: the agent closed the connection`);
  assert.equal(a.bytes[0], 1, `${what}: exit code 1, got ${a.bytes.subarray(0, 1).toString('hex')}`);
  const err = JSON.parse(a.bytes.subarray(1).toString()) as { code?: number; msg?: string };
  assert.equal(typeof err.code, 'number', `${what}: ${a.bytes.subarray(1).toString()}`);
}

const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
};

describe('the CNI socket under malformed and hostile clients', () => {
  const node = new TestNode({ podCIDRs: ['10.244.62.0/24'] });
  let baseline = 0;
  before(async () => {
    await node.setup();
    baseline = node.openFds().length;
  });
  after(() => node.cleanup());

  /** A real ADD and DEL through the relay still work. */
  async function serves(tag: string): Promise<void> {
    const pod = await node.addPod(tag);
    const add = await node.cni({ command: 'ADD', containerId: tag, netns: pod });
    assert.equal(add.code, 0, add.stdout);
    assert.equal((await node.cni({ command: 'DEL', containerId: tag, netns: pod })).code, 0);
  }

  async function fdsBack(what: string): Promise<void> {
    const left = await node.settleFds(baseline, 3000);
    assert.ok(left.length <= baseline, `${what}: ${left.length} descriptors, ${baseline} before`);
  }

  test('truncated frames and huge lengths get a CNI error', async () => {
    const cases: Array<[string, Buffer]> = [
      ['nothing', Buffer.alloc(0)],
      ['half a header', Buffer.from([0, 0])],
      ['a header promising 4 GiB', u32(0xffffffff)],
      ['a header promising more than follows', Buffer.concat([u32(100), Buffer.from('CNI_COMMAND=ADD\0')])],
      ['an entry without =', Buffer.concat([u32(6), Buffer.from('CNI_X\0')])],
      ['an entry starting with =', Buffer.concat([u32(4), Buffer.from('=ADD')])],
      ['no command', encodeRequest({ env: {}, stdin: Buffer.from('{}') })],
      [
        'a command, stdin cut mid-JSON',
        encodeRequest({ env: { CNI_COMMAND: 'ADD' }, stdin: Buffer.from('{"cniV') }),
      ],
      ['invalid UTF-8', Buffer.concat([u32(4), Buffer.from([0xff, 0xfe, 0x3d, 0x00])])],
    ];
    const answers = await Promise.all(cases.map(([, frame]) => exchange(node.socket, [frame])));
    for (const [i, [what]] of cases.entries()) assertCniError(answers[i] as Answer, what);
    await serves('fz-trunc');
    await fdsBack('after truncated frames');
  });

  test('an oversized request is refused at once and its connection closed at the deadline, though the sender goes on', async () => {
    // 64 KiB writes every 20 ms for ~9 s, never half-closed: the agent answers once the limit is
    // passed, reads on and drops the rest, and closes at the read deadline (the next write fails).
    const chunk = Buffer.alloc(64 << 10, 0x41);
    const chunks = [u32(16), Buffer.from('CNI_COMMAND=ADD\0'), ...Array.from({ length: 450 }, () => chunk)];
    const logsBefore = node.logs.length;
    const a = await exchange(node.socket, chunks, {
      end: false,
      gapMs: 20,
      timeoutMs: REQUEST_READ_TIMEOUT_MS + 4000,
      halfOpen: true,
    });
    assertCniError(a, 'oversized');
    assert.ok(
      a.firstMs !== undefined && a.firstMs < 2000,
      `answered after ${Math.round(a.firstMs ?? -1)} ms`,
    );
    // Not before: the old code closed right after its answer (~0.4 s), the sender's writes failing.
    assert.ok(
      a.ms > REQUEST_READ_TIMEOUT_MS - 500 && a.ms < REQUEST_READ_TIMEOUT_MS + 2000,
      `closed after ${Math.round(a.ms)} ms`,
    );
    const errors = node.logs
      .slice(logsBefore)
      .split('\n')
      .filter((l) => l.includes('"level":"warn"') || l.includes('"level":"error"'));
    assert.ok(errors.length <= 2, `at most a line or two logged, not one per chunk: ${errors.length}`);
    await serves('fz-big');
    await fdsBack('after oversized requests');
  });

  test('a slow writer is cut off at the read deadline, however steadily it trickles', async () => {
    const frame = encodeRequest({
      env: { CNI_COMMAND: 'VERSION' },
      stdin: Buffer.from('{"cniVersion":"1.0.0"}'),
    });
    // One byte every 500 ms: never idle for 5 s, done only after ~20 s.
    const bytes = [...frame].map((b) => Buffer.from([b]));
    const slow = Array.from({ length: 5 }, () =>
      exchange(node.socket, bytes, { gapMs: 500, timeoutMs: REQUEST_READ_TIMEOUT_MS + 4000 }),
    );
    await serves('fz-slow');
    for (const a of await Promise.all(slow)) {
      assert.equal(a.ended, 'closed', `the agent closed a slow writer (${Math.round(a.ms)} ms)`);
      assert.ok(a.ms < REQUEST_READ_TIMEOUT_MS + 2000, `closed after ${Math.round(a.ms)} ms`);
    }
    await fdsBack('after slow writers');
  });

  test('random frames: every one answered or closed, the agent serves on', async () => {
    const frames = fc.sample(
      fc.oneof(
        fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
        fc
          .tuple(fc.nat({ max: 200 }), fc.uint8Array({ maxLength: 200 }))
          .map(([n, b]) => Buffer.concat([u32(n), Buffer.from(b)])),
        fc
          .dictionary(
            fc.constantFrom(
              'CNI_COMMAND',
              'CNI_CONTAINERID',
              'CNI_NETNS',
              'CNI_IFNAME',
              'CNI_ARGS',
              'CNI_PATH',
            ),
            fc.string({ maxLength: 40 }),
          )
          .map((env) =>
            encodeRequest({ env, stdin: Buffer.from('{"cniVersion":"1.0.0","name":"x","type":"podwire"}') }),
          ),
      ),
      { numRuns: 200, seed: 15 },
    );
    for (let i = 0; i < frames.length; i += 20) {
      const answers = await Promise.all(
        frames.slice(i, i + 20).map((f) => exchange(node.socket, [f], { timeoutMs: 8000 })),
      );
      for (const a of answers) {
        assert.equal(a.ended, 'closed');
        assert.ok(a.bytes.length >= 1, 'an exit code byte');
      }
    }
    assert.ok(node.agent && node.agent.exitCode === null, 'the agent is alive');
    await serves('fz-random');
    await fdsBack('after random frames');
  });

  test('1000 idle connections: calls are served meanwhile, and all are closed at the deadline', async () => {
    const socks: Socket[] = [];
    try {
      for (let i = 0; i < 1000; i++) {
        const s = connect(node.socket);
        s.on('error', () => undefined);
        socks.push(s);
      }
      // The agent accepts them as its event loop gets to them: on a loaded machine (a CI run with an
      // image build beside it) 500 ms was not always enough (seen: 958 descriptors, baseline + 900
      // wanted). Wait for them, up to the idle deadline's half.
      const accepted = Date.now() + REQUEST_READ_TIMEOUT_MS / 2;
      while (node.openFds().length < baseline + 900 && Date.now() < accepted) await sleep(50);
      assert.ok(node.openFds().length >= baseline + 900, `the agent holds them: ${node.openFds().length}`);
      const started = performance.now();
      await serves('fz-idle');
      assert.ok(
        performance.now() - started < REQUEST_READ_TIMEOUT_MS,
        'served before the idle ones timed out',
      );
      const deadline = Date.now() + REQUEST_READ_TIMEOUT_MS + 3000;
      while (node.openFds().length > baseline && Date.now() < deadline) await sleep(100);
      assert.ok(
        node.openFds().length <= baseline,
        `all closed: ${node.openFds().length}, ${baseline} before`,
      );
    } finally {
      for (const s of socks) s.destroy();
    }
  });
});
