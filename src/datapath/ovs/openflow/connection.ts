/**
 * One persistent OpenFlow connection to a bridge's management socket (`unix:DIR/BRIDGE.mgmt`), the
 * way a controller holds one (OpenFlow 1.3.5, 6.3 "OpenFlow Channel Connections"): HELLO with the
 * one version podwire speaks, FEATURES_REQUEST, then requests matched to their replies by xid.
 * It reconnects by itself, forever, with doubling backoff and jitter, until `close()`; an idle
 * switch is probed with ECHO_REQUEST and dropped when it does not answer. While it is down every
 * request fails at once with NotAvailableError (CNI error 50): nothing waits for a switch that is
 * away, and the caller decides whether to retry.
 *
 * Descriptors and timers: the connection owns at most one socket at a time and every timer it
 * starts; a drop or `close()` destroys both. Timers are unref'd; the socket holds the event loop
 * only while an operation is in flight or queued, so an idle connection never keeps a process alive
 * but a caller awaiting a reply is never left behind by an exiting process.
 */
import { connect, type Socket } from 'node:net';
import { DatapathError, DecodeError, NotAvailableError } from '../../../base/errors.js';
import { OFPBF_ATOMIC, OFPBF_ORDERED } from './bundle.js';
import { decodeErrorMsg, type FailedRequest, OpenflowError } from './error-msg.js';
import {
  barrierBatch,
  bundleCommit,
  type Exchange,
  type ExchangeContext,
  multipartReplies,
  type OutgoingMessage,
  requestReply,
  VERSION_TYPES,
} from './exchange.js';
import { decodeFeaturesReply, type SwitchFeatures } from './features.js';
import { OfpFramer } from './framing.js';
import {
  decodeHeader,
  encodeMessage,
  OFP10_VERSION,
  OFP13_VERSION,
  OFPT13,
  type OfpHeader,
} from './header.js';
import { encodeHelloBody, helloAllows } from './hello.js';

export { OpenflowError } from './error-msg.js';
export type { OutgoingMessage } from './exchange.js';
export type { SwitchFeatures } from './features.js';

export interface OpenflowConnectionOptions {
  /** `unix:/path/BRIDGE.mgmt`, or the bare path. */
  target: string;
  /** OFP13_VERSION (default) or OFP10_VERSION. */
  version?: number;
  /** Idle time before an ECHO_REQUEST is sent (default 2000). */
  echoIntervalMs?: number;
  /** No ECHO_REPLY (or no HELLO/FEATURES_REPLY in a handshake) within this: drop and reconnect (default 4000). */
  echoTimeoutMs?: number;
  /** Default 10000. */
  requestTimeoutMs?: number;
  /** Reconnect backoff: initial, doubling up to max, with +-25% jitter (default 50 -> 1000). */
  backoffMs?: { initial: number; max: number };
  /** Operations awaiting replies at once; further ones queue (default 256). */
  maxInFlight?: number;
}

export interface BundleOptions {
  /** OFPBF_ATOMIC: all or nothing (default true). */
  atomic?: boolean;
  /** OFPBF_ORDERED: applied in the order given (default true). */
  ordered?: boolean;
}

/** An operation in flight: the xids routed to it and what it does with their messages. */
interface Operation {
  handle(header: OfpHeader, body: Buffer): void;
  fail(err: Error): void;
}

interface QueuedOperation {
  start: () => void;
  fail: (err: Error) => void;
}

/** HELLO, ERROR, ECHO and FEATURES share their numbers in 1.0 and 1.3. */
const T = OFPT13;

export class OpenflowConnection {
  readonly target: string;
  readonly version: number;
  readonly stats = { connects: 0, disconnects: 0, echoTimeouts: 0 };
  readonly #path: string;
  readonly #context: ExchangeContext;
  readonly #echoIntervalMs: number;
  readonly #echoTimeoutMs: number;
  readonly #requestTimeoutMs: number;
  readonly #backoff: { initial: number; max: number };
  readonly #maxInFlight: number;

  readonly #upListeners = new Set<(f: SwitchFeatures) => void>();
  readonly #downListeners = new Set<(reason: Error) => void>();
  readonly #messageListeners = new Set<(header: OfpHeader, body: Buffer) => void>();
  readonly #upWaiters = new Set<{ resolve: (f: SwitchFeatures) => void; reject: (e: Error) => void }>();

  /** Operations by the xids they wait on. */
  readonly #routes = new Map<number, Operation>();
  readonly #queue: QueuedOperation[] = [];
  #inFlight = 0;
  #nextXid = 1;
  #nextBundleId = 1;
  #closed = false;
  #attempt = 0;
  #reconnectTimer: NodeJS.Timeout | undefined;

  // The current socket and what belongs to it; all reset by #drop.
  #socket: Socket | undefined;
  #framer = new OfpFramer();
  #helloDone = false;
  #featuresXid: number | undefined;
  #features: SwitchFeatures | undefined;
  #handshakeTimer: NodeJS.Timeout | undefined;
  #idleTimer: NodeJS.Timeout | undefined;
  #echoTimer: NodeJS.Timeout | undefined;
  #echoXid: number | undefined;
  #lastRx = 0;
  /** socket.write() said its buffer is full: start no new operation until 'drain'. */
  #blocked = false;

  private constructor(o: OpenflowConnectionOptions) {
    this.target = o.target;
    this.#path = o.target.startsWith('unix:') ? o.target.slice(5) : o.target;
    this.version = o.version ?? OFP13_VERSION;
    const types = VERSION_TYPES[this.version];
    if (!types)
      throw new DatapathError(`OpenFlow version 0x${this.version.toString(16)} is not one podwire speaks`);
    this.#context = {
      version: this.version,
      types,
      error: (body, request, context) => this.#error(body, request, context),
    };
    this.#echoIntervalMs = o.echoIntervalMs ?? 2000;
    this.#echoTimeoutMs = o.echoTimeoutMs ?? 4000;
    this.#requestTimeoutMs = o.requestTimeoutMs ?? 10_000;
    this.#backoff = o.backoffMs ?? { initial: 50, max: 1000 };
    this.#maxInFlight = o.maxInFlight ?? 256;
  }

  /**
   * Starts connecting in the background; retries with backoff until close(). Never throws for an
   * unreachable switch. Equivalent to: `ovs-ofctl -O OpenFlow13 snoop`'s connection, kept open.
   */
  static open(options: OpenflowConnectionOptions): OpenflowConnection {
    const conn = new OpenflowConnection(options);
    conn.#connect();
    return conn;
  }

  /** Operations awaiting replies, and those queued behind them (flow control). */
  get load(): { inFlight: number; queued: number } {
    return { inFlight: this.#inFlight, queued: this.#queue.length };
  }

  /** HELLO exchanged and FEATURES_REPLY received on the current socket. */
  get connected(): boolean {
    return this.#features !== undefined;
  }

  /** The current switch's features; undefined while down. */
  get features(): SwitchFeatures | undefined {
    return this.#features;
  }

  /** After each successful (re)connect. Returns an unsubscribe. */
  onUp(listener: (features: SwitchFeatures) => void): () => void {
    this.#upListeners.add(listener);
    return () => this.#upListeners.delete(listener);
  }

  /** When a connection that was up is lost (not at close()). Returns an unsubscribe. */
  onDown(listener: (reason: Error) => void): () => void {
    this.#downListeners.add(listener);
    return () => this.#downListeners.delete(listener);
  }

  /** Messages no request waits for (PORT_STATUS, FLOW_REMOVED, PACKET_IN, late replies). */
  onMessage(listener: (header: OfpHeader, body: Buffer) => void): () => void {
    this.#messageListeners.add(listener);
    return () => this.#messageListeners.delete(listener);
  }

  /**
   * Resolves at once when connected, else at the next connect; rejects with NotAvailableError after
   * `timeoutMs`. No ovs-ofctl equivalent (it connects anew for every command).
   */
  waitUp(timeoutMs: number): Promise<SwitchFeatures> {
    if (this.#features) return Promise.resolve(this.#features);
    if (this.#closed) return Promise.reject(this.#closedError());
    return new Promise((resolve, reject) => {
      // A ref'd timer: the caller awaits this, so the process must not exit under it.
      const timer = setTimeout(() => {
        this.#upWaiters.delete(waiter);
        reject(
          new NotAvailableError(`OpenFlow connection to ${this.target} is not up after ${timeoutMs} ms`),
        );
      }, timeoutMs);
      const waiter = {
        resolve: (f: SwitchFeatures) => {
          clearTimeout(timer);
          resolve(f);
        },
        reject: (e: Error) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      this.#upWaiters.add(waiter);
    });
  }

  /**
   * One request, one reply matched by xid; resolves with the reply's body (after the header). Only
   * for requests the switch answers (ECHO, FEATURES, BARRIER, GET_CONFIG...); a FLOW_MOD has no reply:
   * use transact(). Equivalent to: `ovs-ofctl -O OpenFlow13 show` (for FEATURES_REQUEST).
   */
  request(type: number, body?: Uint8Array): Promise<Buffer> {
    return this.#submit<Buffer>(`request ${type}`, (ex) => requestReply(ex, this.#context, type, body));
  }

  /**
   * OFPT_MULTIPART_REQUEST (1.0: STATS_REQUEST); every reply body after its multipart header, up
   * to the one without OFPMPF_REPLY_MORE. Equivalent to: `ovs-ofctl -O OpenFlow13 dump-flows` (OFPMP_FLOW),
   * `dump-ports-desc` (OFPMP_PORT_DESC), `dump-desc` (OFPMP_DESC), without the formatting.
   */
  multipart(mpType: number, body?: Uint8Array, flags = 0): Promise<Buffer[]> {
    return this.#submit<Buffer[]>(`multipart ${mpType}`, (ex) =>
      multipartReplies(ex, this.#context, mpType, body, flags),
    );
  }

  /**
   * Sends `messages`, then BARRIER_REQUEST; resolves at BARRIER_REPLY when none of them drew an
   * ERROR, else rejects with the OpenflowError of the first that did (earlier ones are applied:
   * use bundle() for all or nothing). Equivalent to: `ovs-ofctl add-flows` (several FLOW_MODs
   * then a barrier).
   */
  transact(messages: OutgoingMessage[]): Promise<void> {
    return this.#submit<void>('transact', (ex) => barrierBatch(ex, this.#context, messages));
  }

  /**
   * The messages as one bundle (ONF EXT-230 on 1.3; see bundle.ts): OPEN, ADD each, CLOSE, then
   * COMMIT when no ADD drew an ERROR, else DISCARD. Rejects with the OpenflowError of the first
   * failing message, its index included; with `atomic` (the default) nothing of a failed bundle is
   * applied (see exchange.ts for how). A message refused at ADD discards the bundle whatever the
   * flags, and OVS reverts a commit that fails whatever the flags too; in OVS, OFPBF_ATOMIC only
   * refuses PORT_MODs (which it cannot apply atomically) at commit.
   * Equivalent to: `ovs-ofctl -O OpenFlow13 --bundle add-flows`.
   */
  bundle(messages: OutgoingMessage[], options: BundleOptions = {}): Promise<void> {
    if (this.version === OFP10_VERSION) {
      return Promise.reject(
        new DatapathError('bundles need OpenFlow 1.3 (ONF EXT-230); this connection speaks 1.0'),
      );
    }
    const flags =
      (options.atomic !== false ? OFPBF_ATOMIC : 0) | (options.ordered !== false ? OFPBF_ORDERED : 0);
    const id = this.#nextBundleId++;
    return this.#submit<void>(`bundle ${id}`, (ex) => bundleCommit(ex, this.#context, id, flags, messages));
  }

  /**
   * Drops the current socket (if any) and reconnects: what a lost switch looks like to everything
   * waiting on it. Equivalent to: shutdown(2) on its socket, then a reconnect.
   */
  reconnect(reason = 'reconnect asked for'): void {
    if (this.#closed) return;
    if (this.#socket) this.#drop(new DatapathError(reason));
  }

  /**
   * Stops reconnecting, closes the socket, fails everything pending with DatapathError; resolves when
   * the descriptor is closed. Idempotent. onDown does not fire for it. Equivalent to close(2).
   */
  close(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#closed = true;
    clearTimeout(this.#reconnectTimer);
    this.#reconnectTimer = undefined;
    const socket = this.#socket;
    const closed =
      socket && !socket.destroyed
        ? new Promise<void>((res) => socket.once('close', () => res()))
        : Promise.resolve();
    this.#drop(this.#closedError());
    for (const w of this.#upWaiters) w.reject(this.#closedError());
    this.#upWaiters.clear();
    return closed;
  }

  // --- operations ---------------------------------------------------------------------------

  #closedError(): DatapathError {
    return new DatapathError(`OpenFlow connection to ${this.target} is closed`);
  }

  #downError(): NotAvailableError {
    return new NotAvailableError(`the OpenFlow connection to ${this.target} is down`);
  }

  #error(body: Buffer, request: FailedRequest, context: string): OpenflowError {
    return new OpenflowError(this.version, decodeErrorMsg(body), request, `${context} on ${this.target}`);
  }

  /**
   * Runs one operation: `start` sends its messages (through the handle it is given) and sets how
   * the replies routed to it are handled. Queued while `maxInFlight` operations are in flight or
   * the socket's buffer is full; failed at once while the connection is down.
   */
  #submit<R>(what: string, start: (op: Exchange<R>) => void): Promise<R> {
    if (this.#closed) return Promise.reject(this.#closedError());
    if (!this.#features) return Promise.reject(this.#downError());
    return new Promise<R>((resolve, reject) => {
      const xids: number[] = [];
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const finish = () => {
        settled = true;
        clearTimeout(timer);
        for (const x of xids) this.#routes.delete(x);
        this.#inFlight--;
        this.#pump();
      };
      const handle: Exchange<R> = {
        handle: () => undefined,
        allocate: () => {
          const xid = this.#allocateXid();
          xids.push(xid);
          this.#routes.set(xid, operation);
          return xid;
        },
        write: (type, xid, body) => this.#write(encodeMessage(this.version, type, xid, body)),
        send: (type, body) => {
          const xid = handle.allocate();
          handle.write(type, xid, body);
          return xid;
        },
        resolve: (v) => {
          if (settled) return;
          finish();
          resolve(v);
        },
        reject: (e) => {
          if (settled) return;
          finish();
          reject(e);
        },
      };
      const operation: Operation = {
        handle: (h, b) => {
          try {
            handle.handle(h, b);
          } catch (err) {
            // A reply this operation cannot decode fails the operation, not the connection.
            handle.reject(err instanceof Error ? err : new DecodeError(String(err)));
          }
        },
        fail: (e) => handle.reject(e),
      };
      const begin = () => {
        if (!this.#features) {
          reject(this.#downError());
          return;
        }
        this.#inFlight++;
        timer = setTimeout(
          () =>
            handle.reject(
              new DatapathError(
                `OpenFlow ${what} on ${this.target}: no reply within ${this.#requestTimeoutMs} ms`,
              ),
            ),
          this.#requestTimeoutMs,
        );
        timer.unref();
        try {
          start(handle);
        } catch (err) {
          handle.reject(err instanceof Error ? err : new DatapathError(String(err)));
        }
        this.#updateRef();
      };
      if (this.#inFlight < this.#maxInFlight && !this.#blocked && this.#queue.length === 0) begin();
      else {
        this.#queue.push({ start: begin, fail: reject });
        this.#updateRef();
      }
    });
  }

  /** Starts queued operations while there is room. */
  #pump(): void {
    while (this.#queue.length > 0 && this.#inFlight < this.#maxInFlight && !this.#blocked && this.#features) {
      (this.#queue.shift() as QueuedOperation).start();
    }
    this.#updateRef();
  }

  #allocateXid(): number {
    for (;;) {
      const xid = this.#nextXid;
      this.#nextXid = (this.#nextXid + 1) >>> 0 || 1;
      if (!this.#routes.has(xid) && xid !== this.#echoXid && xid !== this.#featuresXid) return xid;
    }
  }

  #write(msg: Buffer): void {
    const socket = this.#socket;
    if (!socket || socket.destroyed) return;
    if (!socket.write(msg)) this.#blocked = true;
  }

  /** The socket holds the event loop only while an operation is in flight or queued. */
  #updateRef(): void {
    if (!this.#socket) return;
    if (this.#inFlight > 0 || this.#queue.length > 0) this.#socket.ref();
    else this.#socket.unref();
  }

  // --- the connection's life ----------------------------------------------------------------

  #connect(): void {
    this.#reconnectTimer = undefined;
    if (this.#closed) return;
    const socket = connect(this.#path);
    socket.unref();
    this.#socket = socket;
    this.#framer = new OfpFramer();
    this.#helloDone = false;
    socket.on('connect', () => {
      if (socket !== this.#socket) return;
      this.#lastRx = Date.now();
      this.#write(encodeMessage(this.version, T.HELLO, this.#allocateXid(), encodeHelloBody(this.version)));
    });
    socket.on('data', (chunk: Buffer) => this.#onData(socket, chunk));
    socket.on('drain', () => {
      if (socket !== this.#socket) return;
      this.#blocked = false;
      this.#pump();
    });
    socket.on('error', (err) => {
      if (socket === this.#socket) this.#drop(err);
    });
    socket.on('close', () => {
      if (socket === this.#socket) this.#drop(new DatapathError('the switch closed the connection'));
    });
    this.#handshakeTimer = setTimeout(
      () => this.#drop(new DatapathError(`no HELLO and FEATURES_REPLY within ${this.#echoTimeoutMs} ms`)),
      this.#echoTimeoutMs,
    );
    this.#handshakeTimer.unref();
  }

  /** Ends the current socket; fails what waits on it; reconnects unless closed. */
  #drop(reason: Error): void {
    const socket = this.#socket;
    if (!socket) return;
    const wasUp = this.#features !== undefined;
    this.#socket = undefined;
    this.#features = undefined;
    this.#featuresXid = undefined;
    this.#echoXid = undefined;
    this.#blocked = false;
    clearTimeout(this.#handshakeTimer);
    clearTimeout(this.#idleTimer);
    clearTimeout(this.#echoTimer);
    this.#handshakeTimer = this.#idleTimer = this.#echoTimer = undefined;
    socket.destroy();
    const err = this.#closed
      ? this.#closedError()
      : new NotAvailableError(`the OpenFlow connection to ${this.target} is down: ${reason.message}`, {
          cause: reason,
        });
    for (const op of new Set(this.#routes.values())) op.fail(err);
    this.#routes.clear();
    for (const q of this.#queue.splice(0)) q.fail(err);
    if (wasUp && !this.#closed) {
      this.stats.disconnects++;
      for (const l of this.#downListeners) queueMicrotask(() => l(reason));
    }
    if (!this.#closed) this.#scheduleReconnect();
  }

  #scheduleReconnect(): void {
    const base = Math.min(this.#backoff.max, this.#backoff.initial * 2 ** this.#attempt);
    this.#attempt = Math.min(this.#attempt + 1, 30);
    const delay = Math.round(base * (0.75 + Math.random() * 0.5));
    this.#reconnectTimer = setTimeout(() => this.#connect(), delay);
    this.#reconnectTimer.unref();
  }

  #onData(socket: Socket, chunk: Buffer): void {
    if (socket !== this.#socket) return;
    this.#lastRx = Date.now();
    let messages: Buffer[];
    try {
      messages = this.#framer.push(chunk);
    } catch (err) {
      this.#drop(err instanceof Error ? err : new DecodeError(String(err)));
      return;
    }
    for (const msg of messages) {
      if (socket !== this.#socket) return; // a message before this one dropped the connection
      this.#onMessage(msg);
    }
  }

  #onMessage(msg: Buffer): void {
    const h = decodeHeader(msg);
    const body = msg.subarray(8);
    if (!this.#helloDone) {
      if (h.type !== T.HELLO) {
        this.#drop(new DecodeError(`the switch sent type ${h.type} before HELLO`));
        return;
      }
      if (!helloAllows(msg, this.version)) {
        this.#drop(
          new DatapathError(
            `the switch's HELLO (version 0x${h.version.toString(16)}) has no common version with 0x${this.version.toString(16)}`,
          ),
        );
        return;
      }
      this.#helloDone = true;
      this.#featuresXid = this.#allocateXid();
      this.#write(encodeMessage(this.version, T.FEATURES_REQUEST, this.#featuresXid));
      return;
    }
    if (h.version !== this.version) {
      this.#drop(
        new DecodeError(
          `the switch sent version 0x${h.version.toString(16)} after negotiating 0x${this.version.toString(16)}`,
        ),
      );
      return;
    }
    if (h.type === T.ECHO_REQUEST) {
      this.#write(encodeMessage(this.version, T.ECHO_REPLY, h.xid, body));
      return;
    }
    if (h.type === T.ECHO_REPLY && h.xid === this.#echoXid) {
      this.#echoXid = undefined;
      clearTimeout(this.#echoTimer);
      this.#armIdle(this.#echoIntervalMs);
      return;
    }
    if (h.xid === this.#featuresXid && this.#featuresXid !== undefined) {
      this.#featuresXid = undefined;
      if (h.type !== T.FEATURES_REPLY) {
        this.#drop(new DatapathError(`the switch answered FEATURES_REQUEST with type ${h.type}`));
        return;
      }
      this.#up(decodeFeaturesReply(body, this.version));
      return;
    }
    const op = this.#routes.get(h.xid);
    if (op) {
      op.handle(h, body);
      return;
    }
    for (const l of this.#messageListeners) queueMicrotask(() => l(h, body));
  }

  #up(features: SwitchFeatures): void {
    clearTimeout(this.#handshakeTimer);
    this.#handshakeTimer = undefined;
    this.#features = features;
    this.#attempt = 0;
    this.stats.connects++;
    this.#armIdle(this.#echoIntervalMs);
    for (const w of this.#upWaiters) w.resolve(features);
    this.#upWaiters.clear();
    for (const l of this.#upListeners) queueMicrotask(() => l(features));
    this.#pump();
  }

  /** Sends an ECHO_REQUEST once nothing was received for echoIntervalMs. */
  #armIdle(delay: number): void {
    clearTimeout(this.#idleTimer);
    this.#idleTimer = setTimeout(() => this.#onIdle(), delay);
    this.#idleTimer.unref();
  }

  #onIdle(): void {
    if (!this.#features || this.#echoXid !== undefined) return;
    const idle = Date.now() - this.#lastRx;
    if (idle < this.#echoIntervalMs) {
      this.#armIdle(this.#echoIntervalMs - idle);
      return;
    }
    this.#echoXid = this.#allocateXid();
    this.#write(encodeMessage(this.version, T.ECHO_REQUEST, this.#echoXid));
    this.#echoTimer = setTimeout(() => {
      this.stats.echoTimeouts++;
      this.#drop(new DatapathError(`no ECHO_REPLY within ${this.#echoTimeoutMs} ms`));
    }, this.#echoTimeoutMs);
    this.#echoTimer.unref();
  }
}
