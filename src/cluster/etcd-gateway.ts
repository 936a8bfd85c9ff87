/**
 * HTTP transport to etcd's JSON gateway (grpc-gateway, served on every client URL: POST /v3/kv/range,
 * /v3/kv/txn, /v3/watch, ...). Node's own `http`, no dependency.
 *
 * Invariants:
 * - every unary call finishes within `requestTimeoutMs` per endpoint tried (timeouts, not hope);
 * - a stream (watch) is bounded until its response headers arrive; afterwards its liveness is the
 *   health monitor's business (a paused etcd keeps the TCP connection open but sends nothing);
 * - nothing is pooled: each request has its own connection, so a dead etcd never leaves a stale
 *   pooled socket to trip the next call, and `destroy()` ends everything in flight.
 */
import http from 'node:http';
import { createConnection as netConnect, type Socket } from 'node:net';
import { InvalidConfigError, PodwireError, StoreError } from '../base/errors.js';

/** Opens the TCP connection to an endpoint; tests pass one that creates the socket in another netns. */
export type ConnectFn = (target: { host: string; port: number }) => Socket;

export interface EtcdGatewayOptions {
  /** Client URLs, `http://host:port`. */
  endpoints: string[];
  requestTimeoutMs: number;
  connect?: ConnectFn;
}

/**
 * A failed gateway call. `unreachable` is true when etcd could not be reached or could not answer
 * (connection refused, timeout, reset, no leader): the store's health goes down on those only.
 * `grpcCode` is etcd's own error code when it answered with one (11 = revision compacted).
 */
export class GatewayError extends PodwireError {
  readonly unreachable: boolean;
  readonly grpcCode: number | undefined;

  constructor(message: string, opts: { unreachable: boolean; grpcCode?: number; cause?: unknown }) {
    super('ERR_STORE', message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.unreachable = opts.unreachable;
    this.grpcCode = opts.grpcCode;
  }
}

/** gRPC codes that mean "etcd cannot serve right now" rather than "your request is wrong". */
const UNAVAILABLE_CODES = new Set([4 /* DEADLINE_EXCEEDED */, 14 /* UNAVAILABLE */]);
/** Errors raised before a byte was sent: trying the next endpoint cannot apply a write twice. */
const CONNECT_ERRNOS = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL']);

interface Endpoint {
  url: string;
  host: string;
  port: number;
}

export function parseEndpoint(url: string): Endpoint {
  let u: URL;
  try {
    u = new URL(url);
  } catch (err) {
    throw new InvalidConfigError(`cluster.endpoints: ${JSON.stringify(url)} is not a URL`, {
      cause: err,
    });
  }
  if (u.protocol !== 'http:' || u.pathname !== '/' || u.search !== '' || u.username !== '') {
    throw new InvalidConfigError(`cluster.endpoints: ${url}: must be http://HOST:PORT`);
  }
  const host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname;
  return { url: `http://${u.host}`, host, port: u.port === '' ? 80 : Number(u.port) };
}

export class EtcdGateway {
  readonly #endpoints: Endpoint[];
  readonly #timeoutMs: number;
  readonly #connect: ConnectFn;
  /** Aborts every request in flight; set once by destroy(). */
  readonly #destroyed = new AbortController();
  /** The endpoint that answered last; calls start there. */
  #preferred = 0;

  constructor(opts: EtcdGatewayOptions) {
    if (opts.endpoints.length === 0) {
      throw new InvalidConfigError('cluster.endpoints: at least one etcd endpoint is needed');
    }
    this.#endpoints = opts.endpoints.map(parseEndpoint);
    this.#timeoutMs = opts.requestTimeoutMs;
    this.#connect = opts.connect ?? ((t) => netConnect({ host: t.host, port: t.port }));
  }

  get endpoints(): string[] {
    return this.#endpoints.map((e) => e.url);
  }

  /** POSTs `body` to `path` and returns the parsed answer; tries the next endpoint only on connect errors. */
  async call<T>(path: string, body: unknown, signal?: AbortSignal): Promise<T> {
    let last: unknown;
    for (let i = 0; i < this.#endpoints.length; i++) {
      const index = (this.#preferred + i) % this.#endpoints.length;
      const ep = this.#endpoints[index] as Endpoint;
      try {
        const res = await this.#request(ep, path, body, signal, false);
        const text = await readAll(res);
        this.#preferred = index;
        return parseAnswer<T>(ep, path, res.statusCode ?? 0, text);
      } catch (err) {
        last = err;
        const errno = (err as { cause?: { code?: unknown } }).cause?.code;
        if (!(err instanceof GatewayError) || !CONNECT_ERRNOS.has(String(errno))) throw err;
      }
    }
    throw last;
  }

  /**
   * Opens a streaming POST (the watch) and yields each JSON message. The generator ends when the
   * server ends the stream and throws a GatewayError when the connection breaks; `signal` stops it.
   */
  async *stream(path: string, body: unknown, signal: AbortSignal): AsyncGenerator<unknown, void, undefined> {
    const ep = this.#endpoints[this.#preferred] as Endpoint;
    const res = await this.#request(ep, path, body, signal, true);
    // A refused watch (bad request, no leader) answers with one error body instead of a stream.
    if (res.statusCode !== 200) parseAnswer(ep, path, res.statusCode ?? 0, await readAll(res));
    let buffered = '';
    try {
      for await (const chunk of res) {
        buffered += (chunk as Buffer).toString('utf8');
        let nl = buffered.indexOf('\n');
        while (nl >= 0) {
          const line = buffered.slice(0, nl).trim();
          buffered = buffered.slice(nl + 1);
          if (line !== '') yield parseJson(ep, path, line);
          nl = buffered.indexOf('\n');
        }
      }
    } catch (err) {
      if (signal.aborted || this.#destroyed.signal.aborted) return;
      throw unreachable(ep, path, err);
    } finally {
      res.destroy();
    }
    if (signal.aborted || this.#destroyed.signal.aborted) return;
    throw new GatewayError(`etcd ${ep.url}${path}: stream ended by the server`, { unreachable: true });
  }

  /** Aborts every request in flight and refuses new ones. Idempotent. */
  destroy(): void {
    this.#destroyed.abort(new StoreError('etcd client closed'));
  }

  #request(
    ep: Endpoint,
    path: string,
    body: unknown,
    signal: AbortSignal | undefined,
    streaming: boolean,
  ): Promise<http.IncomingMessage> {
    const payload = Buffer.from(JSON.stringify(body));
    const timeout = AbortSignal.timeout(this.#timeoutMs);
    // The timeout covers the whole unary call, but only the opening of a stream.
    const signals = [this.#destroyed.signal, ...(signal ? [signal] : [])];
    const whole = AbortSignal.any([...signals, ...(streaming ? [] : [timeout])]);
    const opening = AbortSignal.any([whole, timeout]);
    return new Promise((resolve, reject) => {
      if (opening.aborted) {
        reject(abortError(ep, path, opening.reason, timeout));
        return;
      }
      const req = http.request({
        host: ep.host,
        port: ep.port,
        path,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': payload.length },
        createConnection: () => this.#connect({ host: ep.host, port: ep.port }),
        signal: whole,
      });
      const onOpeningAbort = (): void => {
        req.destroy();
        reject(abortError(ep, path, opening.reason, timeout));
      };
      opening.addEventListener('abort', onOpeningAbort, { once: true });
      req.on('response', (res) => {
        opening.removeEventListener('abort', onOpeningAbort);
        resolve(res);
      });
      req.on('error', (err) => {
        opening.removeEventListener('abort', onOpeningAbort);
        reject(whole.aborted ? abortError(ep, path, whole.reason, timeout) : unreachable(ep, path, err));
      });
      req.end(payload);
    });
  }
}

function readAll(res: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
    res.on('aborted', () => reject(new Error('response aborted')));
  });
}

function unreachable(ep: Endpoint, path: string, err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  const text = err instanceof Error ? ((err as { code?: string }).code ?? err.message) : String(err);
  return new GatewayError(`etcd ${ep.url}${path}: unreachable: ${text}`, { unreachable: true, cause: err });
}

function abortError(ep: Endpoint, path: string, reason: unknown, timeout: AbortSignal): GatewayError {
  if (timeout.aborted && (reason as { name?: string })?.name === 'TimeoutError') {
    return new GatewayError(`etcd ${ep.url}${path}: no answer within the request timeout`, {
      unreachable: true,
      cause: reason,
    });
  }
  const why = reason instanceof Error ? reason.message : String(reason);
  return new GatewayError(`etcd ${ep.url}${path}: aborted: ${why}`, { unreachable: false, cause: reason });
}

function parseJson(ep: Endpoint, path: string, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new GatewayError(`etcd ${ep.url}${path}: answer is not JSON: ${text.slice(0, 200)}`, {
      unreachable: false,
      cause: err,
    });
  }
}

/** 200 -> the parsed body; otherwise a GatewayError with etcd's message and gRPC code. */
function parseAnswer<T>(ep: Endpoint, path: string, status: number, text: string): T {
  if (status === 200) return parseJson(ep, path, text) as T;
  let message = text.trim().slice(0, 200);
  let code: number | undefined;
  try {
    const e = JSON.parse(text) as { message?: unknown; error?: unknown; code?: unknown };
    message = String(e.message ?? e.error ?? message);
    code = typeof e.code === 'number' ? e.code : undefined;
  } catch {
    // Not JSON (e.g. "Not Found" from the gateway's mux): the raw text is the message.
  }
  const opts =
    code === undefined
      ? { unreachable: status >= 500 }
      : { unreachable: UNAVAILABLE_CODES.has(code), grpcCode: code };
  throw new GatewayError(`etcd ${ep.url}${path}: HTTP ${status}: ${message}`, opts);
}
