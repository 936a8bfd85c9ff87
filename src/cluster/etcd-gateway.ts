/**
 * HTTP transport to etcd's JSON gateway (grpc-gateway, served on every client URL: POST /v3/kv/range,
 * /v3/kv/txn, /v3/watch, ...). Node's own `http` and `tls`, no dependency.
 *
 * Security (issue 15, finding 1): an `https://` endpoint is spoken over TLS, its certificate verified
 * against the configured CA with its host name or IP address checked; a client certificate is
 * presented when configured. With `auth`, every request carries the token of etcd's
 * /v3/auth/authenticate in its Authorization header; a token etcd no longer accepts (expired,
 * revoked: gRPC code 16) is renewed once and the request tried again. Whether plain `http://` is
 * allowed at all is the configuration's business (config.ts: only with `insecure: true`).
 *
 * Several endpoints (decision 10): calls start at the preferred one, the last that answered. When an
 * endpoint fails in a way that says nothing about the request (no connection, no answer within the
 * timeout, a connection broken, "no leader": HTTP 503 or gRPC 14), the next one becomes preferred,
 * so a hung member costs one timeout and not every call. A read (and the opening of a watch) then goes
 * on to the next endpoint within the same call; a write only when none of it was sent (no connection
 * was made), since a write whose answer was lost may have been applied: the caller gets the error
 * and decides. A watch whose endpoint fails (its own stream, or any call to the same endpoint) ends
 * with `failover` set, and reopens on the preferred endpoint.
 *
 * Invariants:
 * - every unary call finishes within `requestTimeoutMs` per endpoint tried, each endpoint tried at
 *   most once per call (timeouts, not hope);
 * - a stream (watch) is bounded until its response headers arrive; afterwards its liveness is the
 *   health monitor's business (a paused etcd keeps the TCP connection open but sends nothing);
 * - nothing is pooled: each request has its own connection, so a dead etcd never leaves a stale
 *   pooled socket to trip the next call, and `destroy()` ends everything in flight;
 * - nothing outlives its request: each has its own AbortController, which the caller's signal, the
 *   timeout and destroy() end (through a listener removed with the request, and the set of requests
 *   in flight). No long-lived signal is combined with AbortSignal.any per request: on Node 20 every
 *   combined signal stays referenced by its long-lived sources (nodejs/node#55351), ~120 B a request.
 */
import http from 'node:http';
import { isIP, createConnection as netConnect, type Socket } from 'node:net';
import { type SecureContext, connect as tlsConnect } from 'node:tls';
import { InvalidConfigError, StoreError } from '../base/errors.js';
import {
  GatewayError,
  GRPC_INVALID_ARGUMENT,
  GRPC_UNAUTHENTICATED,
  parseAnswer,
  parseJson,
  unreachable,
} from './etcd-answer.js';
import { type Endpoint, parseEndpoint } from './etcd-endpoint.js';
import { type EtcdTls, sameTls, secureContext } from './etcd-tls.js';

/** Opens the TCP connection to an endpoint; tests pass one that creates the socket in another netns. */
export type ConnectFn = (target: { host: string; port: number }) => Socket;

export interface EtcdAuth {
  username: string;
  password: string;
}

export interface EtcdGatewayOptions {
  /** Client URLs, `http://host:port` or `https://host:port`. */
  endpoints: string[];
  requestTimeoutMs: number;
  connect?: ConnectFn;
  /** For `https://` endpoints. */
  tls?: EtcdTls;
  /** etcd user and password: requests carry an auth token. */
  auth?: EtcdAuth;
}

/** Calls that change nothing: tried on the next endpoint whatever became of the first attempt. */
const READ_PATHS = new Set(['/v3/kv/range', '/v3/auth/authenticate']);

export class EtcdGateway {
  readonly #endpoints: Endpoint[];
  readonly #timeoutMs: number;
  readonly #connect: ConnectFn;
  /** Built from the configured PEMs (again when they change); undefined when no endpoint is https. */
  #secureContext: SecureContext | undefined;
  #tls: EtcdTls | undefined;
  #auth: EtcdAuth | undefined;
  /** The auth token in use, or the authentication in flight that all callers wait for. */
  #token: Promise<string | undefined> | undefined;
  /** `#token` once settled. */
  #tokenValue: string | undefined;
  /** Every request in flight (destroy() ends them; a failed endpoint, its streams). */
  readonly #inflight = new Set<Exchange>();
  /** The requests in flight under each caller's signal: one 'abort' listener per signal, removed with its last request. */
  readonly #callers = new Map<AbortSignal, { exchanges: Set<Exchange>; onAbort: () => void }>();
  /** Set once by destroy(). */
  #destroyed = false;
  /** The endpoint that answered last, or the next after one that failed; calls start there. */
  #preferred = 0;

  constructor(opts: EtcdGatewayOptions) {
    if (opts.endpoints.length === 0) {
      throw new InvalidConfigError('cluster.endpoints: at least one etcd endpoint is needed');
    }
    this.#endpoints = opts.endpoints.map(parseEndpoint);
    this.#timeoutMs = opts.requestTimeoutMs;
    this.#connect = opts.connect ?? ((t) => netConnect({ host: t.host, port: t.port }));
    this.#auth = opts.auth;
    this.#tls = opts.tls;
    this.#secureContext = this.#endpoints.some((e) => e.secure) ? secureContext(opts.tls ?? {}) : undefined;
  }

  /**
   * New certificates or credentials (rotated files): later connections use them; requests in flight
   * and an open watch keep theirs. Throws ERR_INVALID_CONFIG, keeping the old ones, when the new
   * PEMs are unusable. Returns whether anything changed.
   */
  setSecrets(secrets: { tls?: EtcdTls; auth?: EtcdAuth }): boolean {
    let changed = false;
    if (!sameTls(this.#tls, secrets.tls) && this.#secureContext !== undefined) {
      this.#secureContext = secureContext(secrets.tls ?? {});
      this.#tls = secrets.tls;
      changed = true;
    }
    const auth = secrets.auth;
    if (auth?.username !== this.#auth?.username || auth?.password !== this.#auth?.password) {
      this.#auth = auth;
      this.forgetToken();
      changed = true;
    }
    return changed;
  }

  get endpoints(): string[] {
    return this.#endpoints.map((e) => e.url);
  }

  /** The endpoint calls and the next watch start at (the last that answered, or the next after one that failed). */
  get preferred(): string {
    return (this.#endpoints[this.#preferred] as Endpoint).url;
  }

  /**
   * POSTs `body` to `path` and returns the parsed answer. On an endpoint that cannot answer (see the
   * header) a read goes on to the next endpoint; a write only when it was not sent. `readOnly`
   * marks a call that changes nothing (default: by path, /v3/kv/range and authentication). With
   * auth, a token etcd refuses (expired) is renewed once and the call made again.
   */
  async call<T>(
    path: string,
    body: unknown,
    signal?: AbortSignal,
    opts: { readOnly?: boolean } = {},
  ): Promise<T> {
    const readOnly = opts.readOnly ?? READ_PATHS.has(path);
    const token = await this.#currentToken();
    try {
      return await this.#callOnce<T>(path, body, signal, token, readOnly);
    } catch (err) {
      // Renew on a refused token; also when no token was needed at first (etcd's auth enabled since).
      const renew =
        this.#auth !== undefined &&
        err instanceof GatewayError &&
        (err.grpcCode === GRPC_UNAUTHENTICATED || (token === undefined && err.rejected));
      if (!renew) throw err;
      this.forgetToken(token);
      return await this.#callOnce<T>(path, body, signal, await this.#currentToken(), readOnly);
    }
  }

  /** Drops `token` (etcd refused it; undefined: whatever is held) so that the next call authenticates afresh. */
  forgetToken(token?: string): void {
    if (token !== undefined && token !== this.#tokenValue) return; // already renewed
    this.#token = undefined;
    this.#tokenValue = undefined;
  }

  /** The token to send, authenticating first when none is held; undefined without auth. */
  #currentToken(): Promise<string | undefined> {
    if (this.#auth === undefined) return Promise.resolve(undefined);
    if (this.#token === undefined) {
      // Not bound to the first caller's signal: others may be waiting for the same token.
      const pending = this.#authenticate(this.#auth);
      this.#token = pending;
      pending.then(
        (t) => {
          if (this.#token === pending) this.#tokenValue = t;
        },
        // A failed authentication is not kept: the next call tries again.
        () => {
          if (this.#token === pending) this.#token = undefined;
        },
      );
    }
    return this.#token;
  }

  /** Equivalent to: `etcdctl auth authenticate` (POST /v3/auth/authenticate {name, password}). */
  async #authenticate(auth: EtcdAuth): Promise<string | undefined> {
    try {
      const res = await this.#callOnce<{ token?: string }>(
        '/v3/auth/authenticate',
        { name: auth.username, password: auth.password },
        undefined,
        undefined,
        true,
      );
      if (typeof res.token !== 'string' || res.token === '') {
        throw new GatewayError(`etcd /v3/auth/authenticate: answer carries no token`, {
          unreachable: false,
          rejected: true,
        });
      }
      return res.token;
    } catch (err) {
      // etcd without auth enabled needs no token: requests go without one.
      if (err instanceof GatewayError && /authentication is not enabled/.test(err.message)) return undefined;
      if (err instanceof GatewayError && err.grpcCode === GRPC_INVALID_ARGUMENT) {
        throw new GatewayError(
          `${err.message} (cluster.auth: user ${JSON.stringify(auth.username)}: check the username and passwordFile)`,
          { unreachable: false, rejected: true, grpcCode: err.grpcCode, cause: err },
        );
      }
      throw err;
    }
  }

  async #callOnce<T>(
    path: string,
    body: unknown,
    signal: AbortSignal | undefined,
    token: string | undefined,
    readOnly: boolean,
  ): Promise<T> {
    const payload = Buffer.from(JSON.stringify(body));
    const start = this.#preferred;
    let last: unknown;
    for (let i = 0; i < this.#endpoints.length; i++) {
      const index = (start + i) % this.#endpoints.length;
      const ep = this.#endpoints[index] as Endpoint;
      const ex = this.#begin(index, false, signal);
      try {
        const res = await this.#send(ep, path, payload, token, ex);
        const text = await readAll(ep, path, res, ex);
        const answer = parseAnswer<T>(ep, path, res.statusCode ?? 0, text, this.#auth !== undefined);
        this.#preferred = index;
        return answer;
      } catch (err) {
        if (!(err instanceof GatewayError) || !err.unreachable) {
          // It answered (an error of the request's own, a rejection), or the call was aborted.
          if (ex.answered && ex.ending === undefined) this.#preferred = index;
          throw err;
        }
        this.#failed(index);
        last = err;
        // A write goes on only when none of it left: one whose answer was lost may have been applied.
        if (!readOnly && ex.connected) throw err;
      } finally {
        this.#end(ex);
      }
    }
    throw last;
  }

  /**
   * `index` failed to answer: the next endpoint becomes preferred (unless another already is), and
   * the streams open on `index` end, to reopen there. With one endpoint there is nowhere to move.
   */
  #failed(index: number): void {
    if (this.#endpoints.length < 2) return;
    if (this.#preferred === index) this.#preferred = (index + 1) % this.#endpoints.length;
    const ep = this.#endpoints[index] as Endpoint;
    for (const ex of this.#inflight) {
      if (ex.streaming && ex.index === index && ex.answered) {
        ex.end('failover', new Error(`${ep.url} failed to answer another call`));
      }
    }
  }

  /**
   * Opens a streaming POST (the watch) and yields each JSON message. The generator ends when the
   * server ends the stream and throws a GatewayError when the connection breaks; `signal` stops it.
   * The opening tries each endpoint from the preferred one (a watch request changes nothing); once
   * open, a failure of its endpoint ends it with `failover` when there is another endpoint to go to.
   */
  async *stream(path: string, body: unknown, signal: AbortSignal): AsyncGenerator<unknown, void, undefined> {
    const token = await this.#currentToken();
    const payload = Buffer.from(JSON.stringify(body));
    const start = this.#preferred;
    let opened: { ep: Endpoint; ex: Exchange; res: http.IncomingMessage } | undefined;
    let last: unknown;
    for (let i = 0; i < this.#endpoints.length && opened === undefined; i++) {
      const index = (start + i) % this.#endpoints.length;
      const ep = this.#endpoints[index] as Endpoint;
      const ex = this.#begin(index, true, signal);
      try {
        const res = await this.#send(ep, path, payload, token, ex);
        // A refused watch (bad request, no leader) answers with one error body instead of a stream.
        if (res.statusCode !== 200) {
          parseAnswer(
            ep,
            path,
            res.statusCode ?? 0,
            await readAll(ep, path, res, ex),
            this.#auth !== undefined,
          );
        }
        opened = { ep, ex, res };
      } catch (err) {
        this.#end(ex);
        if (err instanceof GatewayError && err.grpcCode === GRPC_UNAUTHENTICATED) this.forgetToken(token);
        if (!(err instanceof GatewayError) || !err.unreachable) throw err;
        this.#failed(index);
        last = err;
      }
    }
    if (opened === undefined) throw last;
    const { ep, ex, res } = opened;
    this.#preferred = ex.index;
    // The bytes of the message being received, as they came: a message is decoded once its newline
    // arrives, and only the new chunk is searched for it (a large message in many chunks is never
    // re-scanned or re-concatenated per chunk, nor a UTF-8 character cut at a chunk's edge decoded).
    const partial: Buffer[] = [];
    let broken: GatewayError;
    try {
      for await (const chunk of res) {
        let rest = chunk as Buffer;
        for (let nl = rest.indexOf(0x0a); nl >= 0; nl = rest.indexOf(0x0a)) {
          partial.push(rest.subarray(0, nl));
          const line = Buffer.concat(partial).toString('utf8').trim();
          partial.length = 0;
          rest = rest.subarray(nl + 1);
          if (line !== '') yield parseJson(ep, path, line);
        }
        if (rest.length > 0) partial.push(rest);
      }
      if (signal.aborted || this.#destroyed) return;
      broken = new GatewayError(`etcd ${ep.url}${path}: stream ended by the server`, { unreachable: true });
    } catch (err) {
      if (signal.aborted || this.#destroyed) return;
      broken = ended(ep, path, ex, err);
    } finally {
      res.destroy();
      this.#end(ex);
    }
    if (!broken.unreachable) throw broken;
    this.#failed(ex.index);
    if (this.#endpoints.length < 2) throw broken;
    throw new GatewayError(`${broken.message}; the watch moves to ${this.preferred}`, {
      unreachable: true,
      failover: true,
      cause: broken,
    });
  }

  /**
   * One connection to `ep`: TCP, and for https a TLS client on it that verifies the server's chain
   * against the CA and its certificate against the endpoint's host name or IP address (Node's
   * checkServerIdentity). An IP address is not sent as SNI (RFC 6066 allows names only).
   */
  #open(ep: Endpoint): Socket {
    const socket = this.#connect({ host: ep.host, port: ep.port });
    if (!ep.secure) return socket;
    return tlsConnect({
      socket,
      host: ep.host,
      ...(isIP(ep.host) === 0 ? { servername: ep.host } : {}),
      secureContext: this.#secureContext,
      rejectUnauthorized: true,
    });
  }

  /** Aborts every request in flight and refuses new ones. Idempotent. */
  destroy(): void {
    this.#destroyed = true;
    for (const ex of this.#inflight) ex.end('closed', new StoreError('etcd client closed'));
  }

  /** A request to the endpoint `index`, registered until `#end`. */
  #begin(index: number, streaming: boolean, signal: AbortSignal | undefined): Exchange {
    const ex = new Exchange(index, streaming, signal, this.#timeoutMs);
    if (this.#destroyed) ex.end('closed', new StoreError('etcd client closed'));
    this.#inflight.add(ex);
    if (signal?.aborted) ex.end('caller', signal.reason);
    else if (signal !== undefined) {
      let caller = this.#callers.get(signal);
      if (caller === undefined) {
        const exchanges = new Set<Exchange>();
        const onAbort = (): void => {
          for (const e of exchanges) e.end('caller', signal.reason);
        };
        caller = { exchanges, onAbort };
        this.#callers.set(signal, caller);
        signal.addEventListener('abort', onAbort, { once: true });
      }
      caller.exchanges.add(ex);
    }
    return ex;
  }

  /** Unregisters `ex`: no timer, listener or reference of it stays. */
  #end(ex: Exchange): void {
    ex.stopTimer();
    this.#inflight.delete(ex);
    if (ex.caller === undefined) return;
    const caller = this.#callers.get(ex.caller);
    if (caller === undefined || !caller.exchanges.delete(ex) || caller.exchanges.size > 0) return;
    ex.caller.removeEventListener('abort', caller.onAbort);
    this.#callers.delete(ex.caller);
  }

  /** Sends the request of `ex` and resolves with the response once its headers are in. */
  #send(
    ep: Endpoint,
    path: string,
    payload: Buffer,
    token: string | undefined,
    ex: Exchange,
  ): Promise<http.IncomingMessage> {
    return new Promise((resolve, reject) => {
      if (ex.signal.aborted) {
        reject(ended(ep, path, ex, ex.signal.reason));
        return;
      }
      const headers: http.OutgoingHttpHeaders = {
        'content-type': 'application/json',
        'content-length': payload.length,
      };
      if (token !== undefined) headers.authorization = token;
      const req = http.request({
        host: ep.host,
        port: ep.port,
        path,
        method: 'POST',
        headers,
        createConnection: () => {
          const socket = this.#open(ep);
          // From here on bytes of the request may reach etcd (for https: once the handshake is done).
          socket.once(ep.secure ? 'secureConnect' : 'connect', () => {
            ex.connected = true;
          });
          return socket;
        },
        signal: ex.signal,
      });
      req.on('response', (res) => {
        ex.answered = true;
        // The timeout bounds only the opening of a stream (an error answer is read within it).
        if (ex.streaming && res.statusCode === 200) ex.stopTimer();
        resolve(res);
      });
      // Also after the response (an abort then): the rejection is moot, the response fails too.
      req.on('error', (err) => reject(ended(ep, path, ex, err)));
      req.end(payload);
    });
  }
}

/** Why a request was ended on this side: its timeout, the caller's signal, destroy(), its endpoint's failure. */
type Ending = 'timeout' | 'caller' | 'closed' | 'failover';

/**
 * One request in flight: its own AbortController, ended by the caller's signal (through the
 * gateway's listener on it), by its timer, by destroy() or, for a stream, by its endpoint's failure.
 */
class Exchange {
  readonly index: number;
  readonly streaming: boolean;
  readonly caller: AbortSignal | undefined;
  readonly #controller = new AbortController();
  readonly #timer: NodeJS.Timeout;
  /** Set by the first `end`. */
  ending: Ending | undefined;
  /** A connection was made (https: handshake done): etcd may have received the request. */
  connected = false;
  /** The response headers arrived. */
  answered = false;

  constructor(index: number, streaming: boolean, caller: AbortSignal | undefined, timeoutMs: number) {
    this.index = index;
    this.streaming = streaming;
    this.caller = caller;
    this.#timer = setTimeout(() => this.end('timeout', new Error('request timeout')), timeoutMs);
    this.#timer.unref();
  }

  /** Aborts the request (http destroys it, and its response if one came). The first reason stays. */
  end(ending: Ending, reason: unknown): void {
    if (this.ending !== undefined) return;
    this.ending = ending;
    this.#controller.abort(reason);
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  stopTimer(): void {
    clearTimeout(this.#timer);
  }
}

/** The body of `res`; a body cut short (its timeout, a broken connection) is a GatewayError. */
function readAll(ep: Endpoint, path: string, res: http.IncomingMessage, ex: Exchange): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const fail = (err: unknown): void => reject(ended(ep, path, ex, err));
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', fail);
    res.on('aborted', () => fail(new Error('answer cut short')));
  });
}

/** The error of a request that failed (`err`), or that this side ended (`ex.ending`). */
function ended(ep: Endpoint, path: string, ex: Exchange, err: unknown): GatewayError {
  const reason = ex.signal.reason;
  switch (ex.ending) {
    case undefined:
      return unreachable(ep, path, err);
    case 'timeout': {
      const what = ex.answered ? 'answer not complete' : 'no answer';
      return new GatewayError(`etcd ${ep.url}${path}: ${what} within the request timeout`, {
        unreachable: true,
        cause: err,
      });
    }
    case 'failover':
      return new GatewayError(`etcd ${ep.url}${path}: ${(reason as Error).message}`, {
        unreachable: true,
        cause: err,
      });
    default: {
      const why = reason instanceof Error ? reason.message : String(reason);
      return new GatewayError(`etcd ${ep.url}${path}: aborted: ${why}`, {
        unreachable: false,
        cause: reason,
      });
    }
  }
}
