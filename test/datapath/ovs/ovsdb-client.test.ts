/**
 * The OVSDB client against a scripted server on a unix socket: answers matched by id in any order,
 * the server's echo answered, transaction errors named, close and destroy semantics.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { JsonStreamSplitter } from '../../../src/datapath/ovs/json-stream.js';
import { OvsdbClient, OvsdbError } from '../../../src/datapath/ovs/ovsdb-client.js';

const dir = mkdtempSync(join(tmpdir(), 'pwt-ovsdb-'));
const path = join(dir, 'db.sock');
let server: Server;
/** What the scripted server does with each request it receives. */
let onRequest: (msg: Record<string, unknown>, reply: (m: object) => void, sock: Socket) => void;
const received: Array<Record<string, unknown>> = [];

before(async () => {
  server = createServer((sock) => {
    const splitter = new JsonStreamSplitter();
    sock.on('data', (d: Buffer) => {
      for (const m of splitter.push(d)) {
        const msg = m as Record<string, unknown>;
        received.push(msg);
        onRequest(msg, (r) => sock.write(JSON.stringify(r)), sock);
      }
    });
    sock.on('error', () => undefined);
  });
  await new Promise<void>((res) => server.listen(path, res));
});
after(async () => {
  await new Promise((res) => server.close(res));
  rmSync(dir, { recursive: true, force: true });
});

test('answers are matched by id, whatever their order', async () => {
  const held: Array<() => void> = [];
  onRequest = (msg, reply) => {
    held.push(() =>
      reply({ id: msg.id, result: [{ count: (msg.params as unknown[]).length }], error: null }),
    );
    if (held.length === 3) for (const r of held.reverse()) r();
  };
  const c = await OvsdbClient.connect(`unix:${path}`);
  const results = await Promise.all([
    c.transact('Open_vSwitch', [{ op: 'comment', comment: 'a' }]),
    c.transact('Open_vSwitch', [{ op: 'comment' }, { op: 'comment' }]),
    c.transact('Open_vSwitch', [{ op: 'comment' }, { op: 'comment' }, { op: 'comment' }]),
  ]);
  assert.deepEqual(
    results.map((r) => r[0]?.count),
    [2, 3, 4],
  );
  await c.close();
  assert.equal(c.closed, true);
});

test("the server's echo is answered with its own params, and notifications are ignored", async () => {
  let echoAnswer: Record<string, unknown> | undefined;
  onRequest = (msg, reply, sock) => {
    if (msg.method === 'transact') {
      sock.write(JSON.stringify({ id: null, method: 'update', params: [null, {}] }));
      sock.write(JSON.stringify({ id: 'echo-7', method: 'echo', params: ['ping', 7] }));
      setTimeout(() => reply({ id: msg.id, result: [{}], error: null }), 20);
    } else if (msg.id === 'echo-7') {
      echoAnswer = msg;
    }
  };
  const c = await OvsdbClient.connect(path);
  await c.transact('Open_vSwitch', [{ op: 'comment' }]);
  assert.deepEqual(echoAnswer, { id: 'echo-7', result: ['ping', 7], error: null });
  await c.close();
});

test('a failed operation is reported with its index, op, error and details', async () => {
  onRequest = (msg, reply) =>
    reply({
      id: msg.id,
      result: [{}, { error: 'constraint violation', details: 'name must be unique' }, null],
      error: null,
    });
  const c = await OvsdbClient.connect(path);
  await assert.rejects(
    c.transact('Open_vSwitch', [{ op: 'select' }, { op: 'insert' }, { op: 'mutate' }]),
    (e: unknown) =>
      e instanceof OvsdbError &&
      e.code === 'ERR_DATAPATH' &&
      e.error === 'constraint violation' &&
      /operation 1 \(insert\).*name must be unique/.test(e.message),
  );
  await c.close();
});

test('a JSON-RPC error and a request timeout are OvsdbErrors', async () => {
  onRequest = (msg, reply) => {
    if (msg.method === 'list_dbs') reply({ id: msg.id, result: null, error: { error: 'unknown database' } });
  };
  const c = await OvsdbClient.connect(path);
  await assert.rejects(
    c.request('list_dbs', []),
    (e: unknown) => e instanceof OvsdbError && e.error === 'unknown database',
  );
  await assert.rejects(
    c.request('get_schema', ['x'], 50),
    (e: unknown) => e instanceof OvsdbError && e.error === 'timeout',
  );
  c.destroy();
});

test('close waits for requests in flight; destroy fails them; later calls fail', async () => {
  onRequest = (msg, reply) => setTimeout(() => reply({ id: msg.id, result: [{}], error: null }), 30);
  const c = await OvsdbClient.connect(path);
  const inFlight = c.transact('Open_vSwitch', [{ op: 'comment' }]);
  const closing = c.close();
  await assert.rejects(c.transact('Open_vSwitch', []), /closing/);
  assert.deepEqual(await inFlight, [{}]);
  await closing;
  await c.close();
  await assert.rejects(c.transact('Open_vSwitch', []), /closed/);

  onRequest = () => undefined;
  const d = await OvsdbClient.connect(path);
  const lost = d.transact('Open_vSwitch', [{ op: 'comment' }]);
  d.destroy(new Error('test says stop'));
  d.destroy();
  await assert.rejects(lost, /test says stop/);
  assert.match(String(d.failure?.message), /test says stop/);
});

test('the server going away fails requests in flight', async () => {
  onRequest = (_msg, _reply, sock) => sock.destroy();
  const c = await OvsdbClient.connect(path);
  await assert.rejects(c.transact('Open_vSwitch', [{ op: 'comment' }]), /closed|failed/);
  assert.equal(c.closed, true);
});

test('connecting to a missing socket fails with ERR_DATAPATH', async () => {
  await assert.rejects(
    OvsdbClient.connect(join(dir, 'nothing.sock')),
    (e: unknown) => e instanceof OvsdbError && e.code === 'ERR_DATAPATH' && /cannot connect/.test(e.message),
  );
});
