/**
 * An OVSDB client (RFC 7047) over a unix socket: JSON-RPC 1.0 requests matched to their answers by
 * id, so any number of transactions may be in flight on one connection. Answers the server's
 * `echo` (its liveness probe); ignores notifications (podwire monitors nothing).
 *
 * The socket holds the event loop only while a request is in flight: an idle client never keeps a
 * process (or a test) alive. `close()` waits for requests in flight; `destroy()` fails them at once.
 * Both are idempotent, and every later call fails with ERR_DATAPATH.
 */
import { connect, type Socket } from 'node:net';
import { PodwireError } from '../../base/errors.js';
import { JsonStreamSplitter } from './json-stream.js';

/** What one operation of a transaction answered (RFC 7047, 5.2). */
export interface OpResult {
  uuid?: unknown;
  rows?: Array<Record<string, unknown>>;
  count?: number;
  error?: string;
  details?: string;
}

/** A failed request or transaction, with the server's error string (e.g. "constraint violation"). */
export class OvsdbError extends PodwireError {
  /** RFC 7047 error string; 'connection' when the request never got an answer. */
  readonly error: string;

  constructor(error: string, message: string, options?: { cause?: unknown }) {
    super('ERR_DATAPATH', message, options);
    this.error = error;
  }
}

interface Pending {
  method: string;
  resolve: (result: unknown) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

const DEFAULT_TIMEOUT_MS = 30_000;

export class OvsdbClient {
  readonly path: string;
  readonly #socket: Socket;
  readonly #splitter = new JsonStreamSplitter();
  /** Requests sent and not yet answered, by id. Empty once `#failure` is set. */
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  /** Set once the connection is unusable; the reason every later call reports. */
  #failure: Error | undefined;
  #closing: Promise<void> | undefined;
  /** Set by `close()`: runs once no request is in flight any more. */
  #onDrained: (() => void) | undefined;
  /** Told once when the connection fails (the server went away), not when `close()` ends it. */
  readonly #failureListeners = new Set<(err: Error) => void>();

  private constructor(path: string, socket: Socket) {
    this.path = path;
    this.#socket = socket;
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('error', (err) => this.destroy(err));
    socket.on('close', () => this.destroy(new Error('the server closed the connection')));
    socket.unref();
  }

  /** Connects to the unix socket at `path` (the `unix:` prefix of OVSDB remotes is accepted). */
  static connect(path: string, timeoutMs = 5000): Promise<OvsdbClient> {
    const file = path.startsWith('unix:') ? path.slice(5) : path;
    return new Promise((resolve, reject) => {
      const socket = connect(file);
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new OvsdbError('connection', `OVSDB: connecting to ${file} timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeAllListeners('error');
        resolve(new OvsdbClient(file, socket));
      });
      socket.once('error', (err) => {
        clearTimeout(timer);
        socket.destroy();
        reject(new OvsdbError('connection', `OVSDB: cannot connect to ${file}`, { cause: err }));
      });
    });
  }

  get closed(): boolean {
    return this.#failure !== undefined || this.#closing !== undefined;
  }

  /** Why the connection is unusable, or undefined while it is open. */
  get failure(): Error | undefined {
    return this.#failure;
  }

  /** Calls `listener` once when the connection fails (an error, or the server closing it); not after `close()` or a plain `destroy()`. */
  onFailure(listener: (err: Error) => void): void {
    this.#failureListeners.add(listener);
  }

  /** Sends one JSON-RPC request and resolves with its `result`. */
  request(method: string, params: unknown[], timeoutMs = DEFAULT_TIMEOUT_MS): Promise<unknown> {
    if (this.#failure) return Promise.reject(this.#failure);
    if (this.#closing) return Promise.reject(new OvsdbError('connection', `OVSDB: ${this.path} is closing`));
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        this.#release();
        reject(new OvsdbError('timeout', `OVSDB: ${method} got no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#pending.set(id, { method, resolve, reject, timer });
      this.#socket.ref();
      this.#socket.write(JSON.stringify({ method, params, id }));
    });
  }

  /**
   * Runs `ops` as one transaction on `db`. Resolves with one result per operation; rejects with an
   * OvsdbError naming the first failed operation (the server then committed nothing).
   */
  async transact(db: string, ops: object[], timeoutMs = DEFAULT_TIMEOUT_MS): Promise<OpResult[]> {
    const result = await this.request('transact', [db, ...ops], timeoutMs);
    if (!Array.isArray(result)) throw new OvsdbError('protocol', 'OVSDB: transact answered a non-array');
    const results = result as Array<OpResult | null>;
    for (const [i, r] of results.entries()) {
      if (r?.error === undefined) continue;
      const op = i < ops.length ? `operation ${i} (${(ops[i] as { op?: string }).op})` : 'commit';
      const details = r.details ? `: ${r.details}` : '';
      throw new OvsdbError(r.error, `OVSDB transaction failed at ${op}: ${r.error}${details}`);
    }
    return results.map((r) => r ?? {});
  }

  /** Waits for the requests in flight, then closes the connection. */
  close(): Promise<void> {
    if (this.#failure) return Promise.resolve();
    this.#closing ??= new Promise<void>((resolve) => {
      this.#onDrained = () => {
        this.#onDrained = undefined;
        this.destroy();
        resolve();
      };
      if (this.#pending.size === 0) this.#onDrained();
    });
    return this.#closing;
  }

  /** Closes at once; requests in flight fail with `err` (or a "connection closed" error). */
  destroy(err?: Error): void {
    if (this.#failure) return;
    this.#failure = new OvsdbError(
      'connection',
      err
        ? `OVSDB connection to ${this.path} failed: ${err.message}`
        : `OVSDB connection to ${this.path} closed`,
      { cause: err },
    );
    for (const p of this.#pending.values()) {
      clearTimeout(p.timer);
      p.reject(this.#failure);
    }
    this.#pending.clear();
    this.#socket.destroy();
    this.#onDrained?.();
    const failed = err !== undefined && this.#closing === undefined;
    const listeners = [...this.#failureListeners];
    this.#failureListeners.clear();
    if (failed) for (const listener of listeners) listener(this.#failure);
  }

  #onData(chunk: Buffer): void {
    let messages: unknown[];
    try {
      messages = this.#splitter.push(chunk);
    } catch (err) {
      this.destroy(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    for (const m of messages) this.#onMessage(m as Record<string, unknown>);
  }

  #onMessage(msg: Record<string, unknown>): void {
    if (typeof msg.method === 'string') {
      // A request from the server: only echo needs an answer (RFC 7047, 4.1.11); notifications have id null.
      if (msg.id === null || msg.id === undefined) return;
      const answer =
        msg.method === 'echo'
          ? { id: msg.id, result: msg.params, error: null }
          : { id: msg.id, result: null, error: `unknown method ${msg.method}` };
      this.#socket.write(JSON.stringify(answer));
      return;
    }
    const id = msg.id;
    const p = typeof id === 'number' ? this.#pending.get(id) : undefined;
    if (!p) return; // an answer to a request that timed out
    this.#pending.delete(id as number);
    clearTimeout(p.timer);
    this.#release();
    if (msg.error !== null && msg.error !== undefined) {
      const e = msg.error as { error?: string; details?: string } | string;
      const error = typeof e === 'string' ? e : (e.error ?? JSON.stringify(e));
      const details = typeof e === 'object' && e.details ? `: ${e.details}` : '';
      p.reject(new OvsdbError(error, `OVSDB ${p.method} failed: ${error}${details}`));
      return;
    }
    p.resolve(msg.result);
  }

  /** Lets the process exit when nothing is in flight. */
  #release(): void {
    if (this.#pending.size > 0) return;
    this.#socket.unref();
    this.#onDrained?.();
  }
}
