/**
 * The connection against a scripted switch (fake-switch.ts): what the real one cannot be made to do
 * on demand. No descriptor growth over 1000 reconnects, messages split byte by byte, a bad length,
 * no common version, flow control, request timeouts, and the switch's own ECHO_REQUEST.
 */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import type { Socket } from 'node:net';
import { afterEach, beforeEach, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { DatapathError, NotAvailableError } from '../../../../src/base/errors.js';
import { OpenflowConnection } from '../../../../src/datapath/ovs/openflow/connection.js';
import { encodeErrorMsg, OFPET13 } from '../../../../src/datapath/ovs/openflow/error-msg.js';
import { OFPT13 } from '../../../../src/datapath/ovs/openflow/header.js';
import { FakeSwitch } from './fake-switch.js';

let sw: FakeSwitch;
const conns: OpenflowConnection[] = [];
function open(o: Partial<Parameters<typeof OpenflowConnection.open>[0]> = {}): OpenflowConnection {
  const c = OpenflowConnection.open({ target: `unix:${sw.path}`, backoffMs: { initial: 1, max: 5 }, ...o });
  conns.push(c);
  return c;
}

beforeEach(async () => {
  sw = new FakeSwitch();
  await sw.listen();
});
afterEach(async () => {
  for (const c of conns.splice(0)) await c.close();
  await sw.close();
});

function fdCount(): number {
  return readdirSync('/proc/self/fd').length;
}

async function until(fn: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
}

// Depends on: connection.ts #drop (socket destroyed, timers cleared) and #connect (one socket at a time).
test('no descriptor growth over 1000 reconnects (the switch closes each connection)', async (t) => {
  const conn = open();
  await conn.waitUp(2000);
  await sleep(50);
  const before = fdCount();
  let drops = 0;
  sw.onUp = (sock) => {
    if (drops < 1000) {
      drops++;
      setImmediate(() => sock.destroy());
    }
  };
  conn.reconnect('start the loop');
  const t0 = performance.now();
  await until(() => drops === 1000 && conn.connected, 30_000, '1000 reconnects');
  t.diagnostic(`1000 reconnects in ${Math.round(performance.now() - t0)} ms`);
  assert.ok(conn.stats.connects >= 1001, `connects ${conn.stats.connects}`);
  // Closed sockets release their descriptors when libuv closes the handles: allow them a moment.
  await until(() => fdCount() <= before, 3000, `descriptors back to ${before} (now ${fdCount()})`).catch(
    () => undefined,
  );
  assert.ok(fdCount() <= before, `descriptors ${before} before, ${fdCount()} after`);
  await conn.close();
  await sleep(20);
  assert.ok(fdCount() <= before - 1, `the connection's own socket is closed too (${fdCount()} vs ${before})`);
});

// Depends on: framing.ts (partial messages) inside connection.ts.
test('a switch that writes one byte at a time is understood', async () => {
  sw.trickle = true;
  sw.onMessage = (sock, h, body) => {
    if (h.type === OFPT13.BARRIER_REQUEST) sw.send(sock, OFPT13.BARRIER_REPLY, h.xid, body);
  };
  const conn = open();
  const f = await conn.waitUp(2000);
  assert.equal(f.datapathId, 0x1234n);
  assert.equal(f.nTables, 254);
  await conn.request(OFPT13.BARRIER_REQUEST);
  assert.deepEqual(await conn.request(OFPT13.ECHO_REQUEST, Buffer.from('abc')), Buffer.from('abc'));
});

// Depends on: framing.ts (length < 8 is a DecodeError) and connection.ts dropping on it.
test('a message with length < 8 drops the connection; it reconnects', async () => {
  let first = true;
  sw.onMessage = (sock, h) => {
    if (h.type !== OFPT13.BARRIER_REQUEST) return;
    if (first) {
      first = false;
      sock.write(Buffer.from([0x04, OFPT13.BARRIER_REPLY, 0, 4, 0, 0, 0, 1]));
    } else sw.send(sock, OFPT13.BARRIER_REPLY, h.xid);
  };
  const conn = open();
  const downs: Error[] = [];
  conn.onDown((e) => downs.push(e));
  await conn.waitUp(2000);
  await assert.rejects(conn.request(OFPT13.BARRIER_REQUEST), NotAvailableError);
  await conn.waitUp(2000);
  await until(() => downs.length === 1, 1000, 'onDown');
  assert.match(String(downs[0]), /length 4/);
  await conn.request(OFPT13.BARRIER_REQUEST);
});

// Depends on: hello.ts (version bitmap) and connection.ts failing the handshake and retrying.
test('a switch without OpenFlow 1.3 in its HELLO is never "up"; the connection keeps retrying', async () => {
  sw.hello = { version: 0x01, bitmap: 1 << 1 };
  const conn = open();
  await assert.rejects(conn.waitUp(200), NotAvailableError);
  assert.equal(conn.connected, false);
  assert.ok(sw.accepted >= 3, `retried: ${sw.accepted} connections`);
  assert.equal(conn.stats.connects, 0);
  const t0 = performance.now();
  await assert.rejects(conn.request(OFPT13.BARRIER_REQUEST), /OpenFlow connection to .* is down/);
  assert.ok(performance.now() - t0 < 100);
});

// Depends on: connection.ts flow control (maxInFlight, the queue).
test('at most maxInFlight operations are in flight; the rest queue and go out as replies come', async () => {
  const held: Array<() => void> = [];
  let seen = 0;
  sw.onMessage = (sock, h) => {
    seen++;
    held.push(() => sw.send(sock, OFPT13.BARRIER_REPLY, h.xid));
  };
  const conn = open({ maxInFlight: 4 });
  await conn.waitUp(2000);
  const all = Promise.all(Array.from({ length: 10 }, () => conn.request(OFPT13.BARRIER_REQUEST)));
  await sleep(50);
  assert.equal(seen, 4);
  for (let round = 0; round < 3; round++) {
    for (const r of held.splice(0)) r();
    await sleep(30);
  }
  assert.equal(seen, 10);
  for (const r of held.splice(0)) r();
  assert.equal((await all).length, 10);
});

// Depends on: connection.ts request timeout (the connection stays up).
test('a request without a reply fails after requestTimeoutMs; the connection stays up', async () => {
  const conn = open({ requestTimeoutMs: 100 });
  await conn.waitUp(2000);
  const t0 = performance.now();
  await assert.rejects(
    conn.request(OFPT13.BARRIER_REQUEST),
    (e: Error) => e instanceof DatapathError && /no reply within 100 ms/.test(e.message),
  );
  assert.ok(performance.now() - t0 >= 95);
  assert.equal(conn.connected, true);
});

// Depends on: connection.ts answering ECHO_REQUEST and offering unsolicited messages to onMessage.
test("the switch's ECHO_REQUEST is answered with its xid and data; unsolicited messages reach onMessage", async () => {
  let sock: Socket | undefined;
  sw.onUp = (s) => {
    sock = s;
  };
  const replies: Array<{ xid: number; body: string }> = [];
  sw.onMessage = (_s, h, body) => {
    if (h.type === OFPT13.ECHO_REPLY) replies.push({ xid: h.xid, body: body.toString() });
  };
  const conn = open();
  const unsolicited: number[] = [];
  conn.onMessage((h) => unsolicited.push(h.type));
  await conn.waitUp(2000);
  assert.ok(sock);
  sw.send(sock, OFPT13.ECHO_REQUEST, 0xdead, Buffer.from('ping'));
  sw.send(sock, OFPT13.PORT_STATUS, 0, Buffer.alloc(72));
  sw.send(
    sock,
    OFPT13.ERROR,
    777,
    encodeErrorMsg({ errorType: OFPET13.BAD_REQUEST, errorCode: 1, data: Buffer.alloc(8) }),
  );
  await until(() => replies.length === 1 && unsolicited.length === 2, 1000, 'the echo reply');
  assert.deepEqual(replies, [{ xid: 0xdead, body: 'ping' }]);
  assert.deepEqual(unsolicited, [OFPT13.PORT_STATUS, OFPT13.ERROR]);
  assert.equal(conn.connected, true);
});

// Depends on: connection.ts close() (everything pending fails with DatapathError, idempotent, no reconnect).
test('close() fails pending requests and waitUp with a DatapathError and stops reconnecting', async () => {
  const conn = open();
  await conn.waitUp(2000);
  const pending = assert.rejects(
    conn.request(OFPT13.BARRIER_REQUEST),
    (e: Error) => e instanceof DatapathError && !(e instanceof NotAvailableError),
  );
  const accepted = sw.accepted;
  await Promise.all([conn.close(), conn.close()]);
  await pending;
  await assert.rejects(conn.waitUp(100), /closed/);
  await sleep(50);
  assert.equal(sw.accepted, accepted);
});

// Depends on: connection.ts #write backpressure (socket.write() false -> queue until 'drain').
test("a switch that stops reading: further operations queue behind the socket's full buffer", async () => {
  let sock: Socket | undefined;
  sw.onUp = (s) => {
    sock = s;
    s.pause();
  };
  const conn = open({ requestTimeoutMs: 5000 });
  await conn.waitUp(2000);
  const big = Buffer.alloc(60_000, 0x61);
  const replies: Array<Promise<Buffer>> = [];
  for (let i = 0; i < 40 && conn.load.queued === 0; i++) replies.push(conn.request(OFPT13.ECHO_REQUEST, big));
  for (let i = 0; i < 5; i++) replies.push(conn.request(OFPT13.ECHO_REQUEST, big));
  assert.ok(conn.load.queued >= 5, `queued ${conn.load.queued}, in flight ${conn.load.inFlight}`);
  assert.ok(conn.load.inFlight < 40, `in flight ${conn.load.inFlight}`);
  sock?.resume();
  const all = await Promise.all(replies);
  assert.ok(all.every((r) => r.equals(big)));
  assert.deepEqual(conn.load, { inFlight: 0, queued: 0 });
});

/** Runs `code` (an ES module importing the connection) in a child process; resolves with its exit code and time. */
async function child(code: string): Promise<{ code: number | null; ms: number; out: string }> {
  const { spawn } = await import('node:child_process');
  const url = new URL('../../../../src/datapath/ovs/openflow/connection.js', import.meta.url).href;
  const t0 = performance.now();
  const p = spawn(
    process.execPath,
    ['--input-type=module', '-e', `import { OpenflowConnection } from '${url}';\n${code}`],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let out = '';
  p.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exit = await new Promise<number | null>((res) => p.once('exit', res));
  return { code: exit, ms: performance.now() - t0, out };
}

// Depends on: connection.ts (unref'd timers and socket; the socket ref'd while an operation is in flight).
test('an idle or unreachable connection never keeps a process alive; an awaited reply does', async () => {
  const unreachable = await child(`OpenflowConnection.open({ target: 'unix:${sw.dir}/nothing.mgmt' });`);
  assert.equal(unreachable.code, 0);
  assert.ok(unreachable.ms < 3000, `${unreachable.ms} ms`);
  const idle = await child(
    `const c = OpenflowConnection.open({ target: 'unix:${sw.path}' }); await c.waitUp(2000); console.log('up');`,
  );
  assert.equal(idle.code, 0);
  assert.equal(idle.out.trim(), 'up');
  sw.onMessage = (sock, h) => {
    setTimeout(() => sw.send(sock, OFPT13.BARRIER_REPLY, h.xid), 300);
  };
  const awaiting = await child(
    `const c = OpenflowConnection.open({ target: 'unix:${sw.path}' }); await c.waitUp(2000);
     await c.request(20); console.log('replied');`,
  );
  // Exit code 13 would mean the process left with the request unsettled.
  assert.equal(awaiting.code, 0);
  assert.equal(awaiting.out.trim(), 'replied');
});
