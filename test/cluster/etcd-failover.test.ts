/**
 * The etcd client with several endpoints, one of them failing without refusing the connection, and
 * the gateway's handling of its own signals and of a stalled answer:
 *
 * - A: a member that accepts connections and never answers (a paused or partitioned etcd, here a
 *   listener on 127.0.0.1 that holds every connection), or answers "no leader" (HTTP 503, gRPC 14),
 *   is left for the next endpoint: reads and the health probe go on there within the same call, the
 *   watch reconnects there, and a write whose outcome is unknown is not sent twice;
 * - B: no per-request listener or combined signal accumulates on a signal that outlives requests;
 * - C: an answer that stalls after its headers is a timeout (ERR_STORE, health down), not a raw Error.
 *
 * The etcd runs in a namespace of its own (bed/etcd.ts); the stand-ins for failing members listen on
 * 127.0.0.1 of this process's namespace (loopback only), and the client's `connect` sends each
 * endpoint to where it lives.
 */
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import http from 'node:http';
import { createServer, createConnection as netConnect, type Server, type Socket } from 'node:net';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { EtcdServer } from '../../bed/etcd.js';
import { GatewayError } from '../../src/cluster/etcd-answer.js';
import { type ConnectFn, EtcdGateway } from '../../src/cluster/etcd-gateway.js';
import { b64 } from '../../src/cluster/etcd-kv.js';
import { EtcdStore } from '../../src/cluster/etcd-store.js';
import type { NodeRecord } from '../../src/cluster/store.js';
import { etcdForFile } from './etcd-harness.js';
import { EventLog, isCode, within } from './watch-log.js';

/** One etcd for the whole file; each test works under its own key prefix. */
const { server, freshPrefix } = etcdForFile('failover');

const TIMEOUT_MS = 1000;
const TIMINGS = { requestTimeoutMs: TIMEOUT_MS, healthIntervalMs: 300, maxBackoffMs: 500 } as const;

function rec(name: string, n: number): NodeRecord {
  return { name, underlayIP: `10.0.0.${n}`, podCIDRs: [`10.244.${n}.0/24`] };
}

/** A TCP listener on 127.0.0.1 of this namespace; `close()` ends it and every connection it took. */
class Loopback {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  accepted = 0;

  private constructor(onConnection: (s: Socket) => void) {
    this.#server = createServer((s) => {
      this.accepted++;
      this.#sockets.add(s);
      s.on('close', () => this.#sockets.delete(s));
      s.on('error', () => undefined);
      onConnection(s);
    });
  }

  static async listen(onConnection: (s: Socket) => void = () => undefined): Promise<Loopback> {
    const l = new Loopback(onConnection);
    await new Promise<void>((resolve) => l.#server.listen(0, '127.0.0.1', resolve));
    return l;
  }

  get port(): number {
    return (this.#server.address() as { port: number }).port;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  track(s: Socket): void {
    this.#sockets.add(s);
    s.on('close', () => this.#sockets.delete(s));
    s.on('error', () => undefined);
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

/** A member that accepts every connection and never answers (a SIGSTOPped etcd looks the same). */
function hungMember(): Promise<Loopback> {
  return Loopback.listen();
}

/** A member without a leader: every request is answered as etcd's gateway does then (HTTP 503, code 14). */
function leaderlessMember(): Promise<{
  endpoint: string;
  port: number;
  requests: string[];
  close(): Promise<void>;
}> {
  const requests: string[] = [];
  const srv = http.createServer((req, res) => {
    requests.push(req.url ?? '');
    req.resume();
    req.on('end', () => {
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'etcdserver: no leader', code: 14, message: 'etcdserver: no leader' }));
    });
  });
  return new Promise((resolve) =>
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      resolve({
        endpoint: `http://127.0.0.1:${port}`,
        port,
        requests,
        close: async () => {
          srv.closeAllConnections();
          await new Promise<void>((r) => srv.close(() => r()));
        },
      });
    }),
  );
}

/**
 * A relay in front of the test etcd, in one of three modes: `pass` passes bytes both ways; `frozen`
 * passes nothing and takes new connections without answering, its connections staying open (a member
 * paused mid-watch); `reset` closes every new connection at once (a member that is down). `watches()`
 * counts the open connections that carry a watch.
 */
type RelayMode = 'pass' | 'frozen' | 'reset';
async function relayTo(
  s: EtcdServer,
  initial: RelayMode,
): Promise<Loopback & { mode: RelayMode; watches(): number }> {
  const watches = new Set<Socket>();
  const relay: Loopback & { mode: RelayMode; watches(): number } = Object.assign(
    await Loopback.listen((client) => {
      if (relay.mode === 'reset') client.destroy();
      if (relay.mode !== 'pass') return;
      const up = s.connect({ host: s.host, port: s.clientPort });
      relay.track(up);
      client.once('data', (d: Buffer) => {
        if (d.toString('latin1').startsWith('POST /v3/watch ')) watches.add(client);
      });
      client.on('data', (d: Buffer) => relay.mode === 'frozen' || up.write(d));
      up.on('data', (d: Buffer) => relay.mode === 'frozen' || client.write(d));
      client.on('close', () => {
        watches.delete(client);
        up.destroy();
      });
      up.on('close', () => client.destroy());
    }),
    { mode: initial, watches: () => watches.size },
  );
  return relay;
}

/** Endpoints listening in this namespace are reached directly, the etcd through its namespace. */
function routing(s: EtcdServer, localPorts: number[]): ConnectFn {
  return (t) => (localPorts.includes(t.port) ? netConnect({ host: t.host, port: t.port }) : s.connect(t));
}

describe('etcd endpoints: a member that does not answer is left for the next (A)', () => {
  // Before the fix (etcd-gateway.ts #callOnce, then lines 247-258: the next endpoint only on connect
  // errors; #preferred moved only on success, line 253) every call and the probe went to the hung
  // member and timed out.
  test('a hung first member: the open, reads, writes and the watch go to the healthy one', async () => {
    const s = await server();
    const hung = await hungMember();
    let store: EtcdStore | undefined;
    try {
      const started = Date.now();
      store = await EtcdStore.open({
        endpoints: [hung.endpoint, s.endpoint],
        connect: routing(s, [hung.port]),
        prefix: freshPrefix(),
        ...TIMINGS,
      });
      // The probe tried the hung member (one timeout) and then the healthy one, in the same call.
      assert.equal(store.health().ok, true, `health: ${JSON.stringify(store.health())}`);
      assert.ok(Date.now() - started < TIMEOUT_MS + 1500, `open took ${Date.now() - started} ms`);
      const log = new EventLog(store);
      const t0 = Date.now();
      for (let i = 0; i < 10; i++) assert.deepEqual((await store.listNodes()).nodes, []);
      assert.equal((await store.putNode(rec('n1', 1), 'absent')).ok, true);
      await log.waitFor((e) => e.some((x) => x.node.name === 'n1'), 5000);
      // Later calls start at the member that answered: none of them waits for the hung one.
      assert.ok(Date.now() - t0 < 3000, `10 lists, a put and the watch took ${Date.now() - t0} ms`);
      assert.equal(hung.accepted, 1, 'the hung member is tried once, by the probe');
      await log.stop();
      assert.equal(store.health().ok, true);
    } finally {
      await store?.close();
      await hung.close();
    }
  });

  test('a write that timed out is not sent again elsewhere; the next call goes to the next member', async () => {
    // Depends on etcd-gateway.ts #callOnce (line 313: a write goes on only when no connection was
    // made; the hung member took it, so this txn may have committed there) and #failed (line 325:
    // #preferred moves on). Before the fix the second write went to the hung member too.
    const s = await server();
    const hung = await hungMember();
    const prefix = freshPrefix();
    const gw = new EtcdGateway({
      endpoints: [hung.endpoint, s.endpoint],
      requestTimeoutMs: TIMEOUT_MS,
      connect: routing(s, [hung.port]),
    });
    const put = (key: string) =>
      gw.call('/v3/kv/txn', { success: [{ request_put: { key: b64(key), value: b64('v') } }] });
    try {
      const t0 = Date.now();
      await assert.rejects(put(`${prefix}/first`), (err) => {
        assert.ok(err instanceof GatewayError && err.unreachable, String(err));
        assert.match(err.message, new RegExp(`127\\.0\\.0\\.1:${hung.port}.*request timeout`));
        return true;
      });
      assert.ok(Date.now() - t0 < TIMEOUT_MS + 1000, `failed after ${Date.now() - t0} ms`);
      const first = (await s.call('/v3/kv/range', { key: b64(`${prefix}/first`) })) as { kvs?: unknown[] };
      assert.equal(first.kvs, undefined, 'the timed-out write was not retried on the healthy member');
      await within(TIMEOUT_MS, put(`${prefix}/second`), 'the next write, on the healthy member');
      const second = (await s.call('/v3/kv/range', { key: b64(`${prefix}/second`) })) as { kvs?: unknown[] };
      assert.equal(second.kvs?.length, 1);
      assert.equal(hung.accepted, 1);
    } finally {
      gw.destroy();
      await hung.close();
    }
  });

  test('a member answering "no leader" (503, gRPC 14): reads go on to the next member, writes do not', async () => {
    // Depends on etcd-gateway.ts #callOnce (lines 306-313): an unavailable answer is a failure of the
    // endpoint (#failed) and a read goes on. Before the fix the read failed with the 503.
    const s = await server();
    const prefix = freshPrefix();
    const noLeader = await leaderlessMember();
    const opts = { requestTimeoutMs: TIMEOUT_MS, connect: routing(s, [noLeader.port]) };
    const reader = new EtcdGateway({ endpoints: [noLeader.endpoint, s.endpoint], ...opts });
    const writer = new EtcdGateway({ endpoints: [noLeader.endpoint, s.endpoint], ...opts });
    try {
      const r = await within(
        1000,
        reader.call<{ header?: object }>('/v3/kv/range', { key: b64(prefix) }),
        'read',
      );
      assert.ok(r.header !== undefined);
      const put = (key: string) =>
        writer.call('/v3/kv/txn', { success: [{ request_put: { key: b64(key), value: b64('v') } }] });
      await assert.rejects(put(`${prefix}/a`), (err) => err instanceof GatewayError && err.grpcCode === 14);
      await within(1000, put(`${prefix}/b`), 'the next write, on the next member');
      assert.deepEqual(noLeader.requests, ['/v3/kv/range', '/v3/kv/txn']);
    } finally {
      reader.destroy();
      writer.destroy();
      await noLeader.close();
    }
  });

  test('the watch leaves a member that goes silent under it, without a gap and without a health flip', async () => {
    // Depends on etcd-gateway.ts #failed (line 331: a failed call ends the streams on its endpoint),
    // stream() (line 342: opens from #preferred) and etcd-watch.ts line 191 (a failover does not mark
    // the store down). Before the fix (stream() opened on #preferred, then line 269, which the probe
    // never moved) the watch stayed on the frozen member for good.
    const s = await server();
    // Two ways to the one etcd: `first`, which goes silent, and `second`, down until then so that the
    // watch opens on `first` however slow this machine is (a timeout would have moved it on).
    const first = await relayTo(s, 'pass');
    const second = await relayTo(s, 'reset');
    const prefix = freshPrefix();
    const stores: EtcdStore[] = [];
    try {
      const watcher = await EtcdStore.open({
        endpoints: [first.endpoint, second.endpoint],
        connect: routing(s, [first.port, second.port]),
        prefix,
        ...TIMINGS,
      });
      stores.push(watcher);
      const writer = await EtcdStore.open({
        endpoints: [s.endpoint],
        connect: s.connect,
        prefix,
        ...TIMINGS,
      });
      stores.push(writer);
      const log = new EventLog(watcher);
      await writer.putNode(rec('n1', 1), 'absent');
      await log.waitFor((e) => e.length === 1, 5000);
      // n1 may have come with the watch's first list: wait for its stream.
      for (const until = Date.now() + 5000; first.watches() === 0 && Date.now() < until; ) await sleep(10);
      assert.equal(first.watches(), 1, 'the watch runs through the member about to go silent');
      second.mode = 'pass';
      const healthAt = watcher.health().since.getTime();
      first.mode = 'frozen';
      const watchingSince = Date.now();
      await writer.putNode(rec('n2', 2), 'absent');
      await writer.putNode(rec('n3', 3), 'absent');
      // The probe times out on the frozen member (TIMEOUT_MS), the watch reconnects on the other one.
      const events = await log.waitFor((e) => e.length === 3, 5000);
      assert.deepEqual(
        events.map((e) => `${e.type} ${e.node.name}`),
        ['put n1', 'put n2', 'put n3'],
      );
      assert.ok(Date.now() - watchingSince < 5000);
      assert.equal(second.watches(), 1, 'the watch runs through the other member');
      assert.equal(first.watches(), 0, 'the silent stream was closed');
      assert.equal(
        watcher.health().since.getTime(),
        healthAt,
        `health flipped: ${JSON.stringify(watcher.health())}`,
      );
      await within(TIMEOUT_MS, watcher.listNodes(), 'a list after the failover');
      await log.stop();
    } finally {
      for (const st of stores) await st.close();
      await first.close();
      await second.close();
    }
  });
});

describe('etcd gateway: signals (B)', () => {
  test('a long-lived caller signal gains nothing per request; no signal is combined per request', async () => {
    // Depends on etcd-gateway.ts #begin/#end (lines 442-464: one listener per caller signal, removed
    // with its last request). Before the fix #request (then lines 338-342) combined the store-lifetime
    // #destroyed signal and the caller's into AbortSignal.any per request, and on Node 20 each combined
    // signal stays referenced by the long-lived ones (nodejs/node#55351): ~120 B per request, forever.
    const srv = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('{"header":{"revision":"1"}}'));
    });
    await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
    const port = (srv.address() as { port: number }).port;
    const gw = new EtcdGateway({ endpoints: [`http://127.0.0.1:${port}`], requestTimeoutMs: 1000 });
    const lifetime = new AbortController();
    const realAny = AbortSignal.any;
    let combined = 0;
    AbortSignal.any = (signals) => {
      combined++;
      return realAny.call(AbortSignal, signals);
    };
    try {
      for (let i = 0; i < 200; i++) await gw.call('/v3/kv/range', {}, lifetime.signal);
      await Promise.all(Array.from({ length: 50 }, () => gw.call('/v3/kv/range', {}, lifetime.signal)));
      assert.equal(combined, 0, 'AbortSignal.any calls during 250 requests');
      assert.equal(getEventListeners(lifetime.signal, 'abort').length, 0);
      // Node's own record of signals derived from this one (internal; checked where it exists).
      const sym = Object.getOwnPropertySymbols(lifetime.signal).find(
        (x) => x.description === 'kDependantSignals',
      );
      const dependants =
        sym === undefined ? undefined : (lifetime.signal as unknown as Record<symbol, Set<unknown>>)[sym];
      assert.equal(dependants?.size ?? 0, 0);
    } finally {
      AbortSignal.any = realAny;
      gw.destroy();
      srv.closeAllConnections();
      srv.close();
    }
  });

  test('destroy() still ends a request in flight, and refuses new ones', async () => {
    const hung = await hungMember();
    const gw = new EtcdGateway({ endpoints: [hung.endpoint], requestTimeoutMs: 5000 });
    try {
      const pending = gw.call('/v3/kv/range', {});
      while (hung.accepted === 0) await sleep(5);
      gw.destroy();
      await within(
        500,
        assert.rejects(pending, (err) => err instanceof GatewayError && /client closed/.test(err.message)),
        'the call ends on destroy()',
      );
      await assert.rejects(gw.call('/v3/kv/range', {}), /client closed/);
    } finally {
      gw.destroy();
      await hung.close();
    }
  });
});

describe('etcd gateway: an answer that stalls after its headers (C)', () => {
  test('is a timeout: ERR_STORE, and the store is marked unhealthy', async () => {
    // Depends on etcd-gateway.ts readAll (line 560) and ended() (line 591: a timeout once the headers
    // came is "answer not complete", unreachable). Before the fix readAll (then lines 380-387)
    // rejected with Error('response aborted'), which EtcdStore.#op (etcd-store.ts line 249) passed on
    // as it was: no ERR_STORE, health untouched.
    const probeKey = b64('/pwt/stall/probe');
    const srv = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => {
        body += d.toString();
      });
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        if (body.includes(probeKey)) res.end('{"header":{"revision":"1"}}');
        else res.write('{"header":'); // and nothing more
      });
    });
    await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
    const endpoint = `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
    const gw = new EtcdGateway({ endpoints: [endpoint], requestTimeoutMs: TIMEOUT_MS });
    let store: EtcdStore | undefined;
    try {
      const t0 = Date.now();
      await assert.rejects(gw.call('/v3/kv/range', { key: b64('x') }), (err) => {
        assert.ok(err instanceof GatewayError, `not a GatewayError: ${String(err)}`);
        assert.equal(err.code, 'ERR_STORE');
        assert.equal(err.unreachable, true);
        assert.match(err.message, /request timeout/);
        return true;
      });
      assert.ok(Date.now() - t0 < TIMEOUT_MS + 1000, `failed after ${Date.now() - t0} ms`);

      store = await EtcdStore.open({
        endpoints: [endpoint],
        prefix: '/pwt/stall',
        ...TIMINGS,
        healthIntervalMs: 60_000,
      });
      assert.equal(store.health().ok, true);
      await assert.rejects(store.getNode('n1'), isCode('ERR_STORE', /getNode: .*request timeout/));
      assert.equal(store.health().ok, false);
    } finally {
      await store?.close();
      gw.destroy();
      srv.closeAllConnections();
      srv.close();
    }
  });
});
