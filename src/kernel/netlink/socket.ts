/**
 * One NETLINK_ROUTE socket and the request/answer discipline on it. The socket is bound to the
 * network namespace the calling thread is in when `open()` runs and stays there for its lifetime,
 * whatever namespace the thread is in later; it is never reopened. Each instance owns its
 * descriptor, sequence counter and receive buffer: nothing is shared between instances.
 */
import { constants } from 'node:os';
import koffi from 'koffi';
import * as libc from '../libc.js';
import { decodeMessages, encodeDatagram, encodeMessage, type NetlinkMessage } from './codec.js';
import { NetlinkClosedError, NetlinkProtocolError } from './errors.js';
import { decodeDone, decodeNlMsgErr, type ExtAck } from './nlmsgerr.js';
import * as N from './uapi/netlink.js';
import { rtmTypeName } from './uapi/rtnetlink.js';

/** linux/sockios.h: a socket's network namespace, as a new descriptor. */
const SIOCGSKNS = 0x894c;

export interface NetlinkSocketOptions {
  /** Longest wait for one answer; a request that gets none fails with EAGAIN. Default 5000 ms. */
  receiveTimeoutMs?: number;
  /** How often an interrupted dump (NLM_F_DUMP_INTR) is retried before failing with EINTR. Default 5. */
  dumpRetries?: number;
}

/** One request of a batch (`requestBatch`): the header flags besides NLM_F_REQUEST and NLM_F_ACK. */
export interface BatchRequest {
  type: number;
  flags: number;
  payload: Uint8Array;
}

/** A request of a batch the kernel refused: its position in the batch and the kernel's error. */
export interface BatchFailure {
  index: number;
  error: libc.KernelError;
}

/**
 * Bounds on one datagram of a batch. The kernel processes every message of a datagram inside the one
 * `sendmsg`; only refused requests are answered before the final ack, so the receive queue holds at
 * most one small error per message: 128 of them stay far below the default receive buffer.
 */
const BATCH_MAX_MESSAGES = 128;
const BATCH_MAX_BYTES = 32 * 1024;

const MSG_PEEK = 0x02;
const MSG_TRUNC = 0x20;
const INITIAL_BUFFER = 32 * 1024;

/** struct sockaddr_nl with nl_pid 0: the kernel's address, and "assign me a port" when binding. */
export function sockaddrNl(): Buffer {
  const sa = Buffer.alloc(12);
  sa.writeUInt16LE(libc.AF_NETLINK, 0);
  return sa;
}

function errorFrom(type: number, error: number, extack: ExtAck): libc.KernelError {
  return new libc.KernelError(rtmTypeName(type), -error, extack.msg);
}

/**
 * `sendto` on a worker thread (where the kernel does a netlink request's work) for a socket that may be
 * closed meanwhile: `close(fd)` while a call is on a worker closes the descriptor only when that call
 * returns. Closed earlier, its number could be reused, and the worker would send on someone else's
 * descriptor (docs/architecture.md, failure 1).
 */
export class WorkerSends {
  /** Calls on worker threads now. */
  #inWorker = 0;
  /** A descriptor `close` left for the worker thread to finish with; -1 when none. */
  #closeWhenIdle = -1;

  /** Whether a call is on a worker thread now. */
  get busy(): boolean {
    return this.#inWorker > 0;
  }

  async sendto(fd: number, buf: Buffer, to: Buffer): Promise<number> {
    this.#inWorker++;
    try {
      return await libc.sendtoAsync(fd, buf, 0, to);
    } finally {
      this.#inWorker--;
      // close() during the call left the descriptor open for the worker thread: close it now.
      if (this.#inWorker === 0 && this.#closeWhenIdle >= 0) {
        const pending = this.#closeWhenIdle;
        this.#closeWhenIdle = -1;
        libc.close(pending);
      }
    }
  }

  /** Closes `fd` now, or when the call on a worker thread returns. */
  close(fd: number): void {
    if (this.#inWorker > 0) this.#closeWhenIdle = fd;
    else libc.close(fd);
  }
}

export class NetlinkSocket implements Disposable {
  /** The descriptor; -1 if and only if the socket is closed. */
  #fd: number;
  #seq: number;
  #buf: Buffer;
  readonly #timeoutMs: number;
  readonly #dumpRetries: number;
  readonly #kernel = sockaddrNl();
  /** `sendto` calls on worker threads (one at a time: requestAsync queues them). */
  readonly #worker = new WorkerSends();
  /** Settles when the last queued `requestAsync` has; never rejects. */
  #asyncTail: Promise<void> = Promise.resolve();

  private constructor(fd: number, options: NetlinkSocketOptions) {
    this.#fd = fd;
    this.#timeoutMs = options.receiveTimeoutMs ?? 5000;
    this.#dumpRetries = options.dumpRetries ?? 5;
    this.#buf = Buffer.allocUnsafe(INITIAL_BUFFER);
    // Start from a time-derived value so that sockets opened in a row do not share sequence numbers.
    this.#seq = Date.now() >>> 0;
  }

  /** Opens a NETLINK_ROUTE socket in the calling thread's current network namespace. */
  static open(options: NetlinkSocketOptions = {}): NetlinkSocket {
    return new NetlinkSocket(openNetlinkFd(N.NETLINK_ROUTE, options.receiveTimeoutMs ?? 5000), options);
  }

  get closed(): boolean {
    return this.#fd < 0;
  }

  /**
   * Equivalent to: ioctl(fd, SIOCGSKNS): a new descriptor on the network namespace the socket acts in
   * (the one it was opened in), for the caller to close.
   */
  netnsFd(): number {
    const fd = libc.ioctl(this.#openFd(N.NLMSG_NOOP), SIOCGSKNS);
    if (fd < 0) throw new libc.KernelError('ioctl(SIOCGSKNS)', koffi.errno());
    return fd;
  }

  /**
   * Sends one request with NLM_F_ACK and collects the messages answering it until the ack. Throws a
   * KernelError named after the request type when the kernel answers with an error.
   */
  request(type: number, flags: number, payload: Uint8Array): NetlinkMessage[] {
    const seq = this.#send(type, flags | N.NLM_F_REQUEST | N.NLM_F_ACK, payload);
    return this.#collect(type, seq);
  }

  /** Reads the answers to request `seq` until its ack; throws the kernel's error. */
  #collect(type: number, seq: number): NetlinkMessage[] {
    const replies: NetlinkMessage[] = [];
    const deadline = Date.now() + this.#timeoutMs;
    for (;;) {
      for (const m of this.#receive(type, deadline)) {
        if (m.header.seq !== seq) continue; // an answer to an earlier request that timed out
        if (m.header.type === N.NLMSG_ERROR) {
          const e = decodeNlMsgErr(m);
          if (e.error !== 0) throw errorFrom(type, e.error, e.extack);
          return replies;
        }
        if (m.header.type !== N.NLMSG_NOOP) replies.push(m);
      }
    }
  }

  /**
   * `request` with the send (where rtnetlink does the work) on a worker thread. Calls are queued: one
   * in flight per socket, so the answer read after the send is always this request's. Use a socket of
   * its own for these, never one that synchronous requests share.
   */
  requestAsync(type: number, flags: number, payload: Uint8Array): Promise<NetlinkMessage[]> {
    const run = async (): Promise<NetlinkMessage[]> => {
      const fd = this.#openFd(type);
      this.#seq = (this.#seq + 1) >>> 0;
      const seq = this.#seq;
      const msg = encodeMessage({ type, flags: flags | N.NLM_F_REQUEST | N.NLM_F_ACK, seq, pid: 0 }, payload);
      const sent = await this.#worker.sendto(
        fd,
        Buffer.from(msg.buffer, msg.byteOffset, msg.length),
        this.#kernel,
      );
      if (sent !== msg.length) throw new NetlinkProtocolError(`sent ${sent} of ${msg.length} bytes`);
      return this.#collect(type, seq);
    };
    const result = this.#asyncTail.then(run, run);
    this.#asyncTail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }

  /**
   * Several requests per `sendmsg`: each datagram carries up to 128 of them (32 KiB), only its last
   * one with NLM_F_ACK, so the kernel answers a datagram with one ack plus one error per refused
   * request (netlink_rcv_skb acks a request without NLM_F_ACK only when it fails). Every request is
   * tried whatever happens to the others; the refused ones are returned, never thrown. `sendAsync`
   * runs each `sendto` (where rtnetlink does the work) on a worker thread, queued like `requestAsync`.
   */
  async requestBatch(requests: readonly BatchRequest[], sendAsync: boolean): Promise<BatchFailure[]> {
    const failures: BatchFailure[] = [];
    for (let start = 0; start < requests.length; ) {
      let end = start;
      let bytes = 0;
      while (end < requests.length && end - start < BATCH_MAX_MESSAGES) {
        const size = N.NLMSG_ALIGN(N.NLMSG_HDRLEN + (requests[end] as BatchRequest).payload.length);
        if (end > start && bytes + size > BATCH_MAX_BYTES) break;
        bytes += size;
        end++;
      }
      const chunk = requests.slice(start, end);
      const offset = start;
      const run = () => this.#batchDatagram(chunk, offset, sendAsync);
      if (sendAsync) {
        const result = this.#asyncTail.then(run, run);
        this.#asyncTail = result.then(
          () => undefined,
          () => undefined,
        );
        failures.push(...(await result));
      } else {
        failures.push(...(await run()));
      }
      start = end;
    }
    return failures;
  }

  async #batchDatagram(
    chunk: readonly BatchRequest[],
    offset: number,
    sendAsync: boolean,
  ): Promise<BatchFailure[]> {
    const first = chunk[0];
    if (first === undefined) return [];
    const fd = this.#openFd(first.type);
    // Consecutive sequence numbers: request i has firstSeq + i (mod 2^32).
    const firstSeq = (this.#seq + 1) >>> 0;
    const messages: NetlinkMessage[] = [];
    for (const [i, r] of chunk.entries()) {
      this.#seq = (this.#seq + 1) >>> 0;
      const ack = i === chunk.length - 1 ? N.NLM_F_ACK : 0;
      messages.push({
        header: { type: r.type, flags: r.flags | N.NLM_F_REQUEST | ack, seq: this.#seq, pid: 0 },
        payload: r.payload,
      });
    }
    const lastSeq = this.#seq;
    const buf = encodeDatagram(messages);
    let sent: number;
    if (sendAsync) {
      sent = await this.#worker.sendto(fd, buf, this.#kernel);
    } else {
      sent = libc.sendto(fd, buf, 0, this.#kernel);
    }
    if (sent !== buf.length) throw new NetlinkProtocolError(`sent ${sent} of ${buf.length} bytes`);
    const failures: BatchFailure[] = [];
    const deadline = Date.now() + this.#timeoutMs;
    for (;;) {
      for (const m of this.#receive(first.type, deadline)) {
        const i = (m.header.seq - firstSeq) >>> 0;
        if (i >= chunk.length || m.header.type !== N.NLMSG_ERROR) continue;
        const e = decodeNlMsgErr(m);
        const req = chunk[i] as BatchRequest;
        if (e.error !== 0)
          failures.push({ index: offset + i, error: errorFrom(req.type, e.error, e.extack) });
        if (m.header.seq === lastSeq) return failures;
      }
    }
  }

  /** Sends a dump request (NLM_F_DUMP) and collects every message until NLMSG_DONE, retrying interrupted dumps. */
  dump(type: number, payload: Uint8Array): NetlinkMessage[] {
    for (let attempt = 0; ; attempt++) {
      const { messages, interrupted } = this.#dumpOnce(type, payload);
      if (!interrupted) return messages;
      if (attempt >= this.#dumpRetries) {
        throw new libc.KernelError(rtmTypeName(type), constants.errno.EINTR);
      }
    }
  }

  #dumpOnce(type: number, payload: Uint8Array): { messages: NetlinkMessage[]; interrupted: boolean } {
    const seq = this.#send(type, N.NLM_F_REQUEST | N.NLM_F_DUMP, payload);
    const messages: NetlinkMessage[] = [];
    let interrupted = false;
    const deadline = Date.now() + this.#timeoutMs;
    for (;;) {
      for (const m of this.#receive(type, deadline)) {
        if (m.header.seq !== seq) continue;
        if ((m.header.flags & N.NLM_F_DUMP_INTR) !== 0) interrupted = true;
        if (m.header.type === N.NLMSG_DONE) {
          const done = decodeDone(m);
          if (done.error !== 0) throw errorFrom(type, done.error, done.extack);
          return { messages, interrupted };
        }
        if (m.header.type === N.NLMSG_ERROR) {
          const e = decodeNlMsgErr(m);
          if (e.error !== 0) throw errorFrom(type, e.error, e.extack);
          return { messages, interrupted };
        }
        if (m.header.type !== N.NLMSG_NOOP) messages.push(m);
      }
    }
  }

  #send(type: number, flags: number, payload: Uint8Array): number {
    const fd = this.#openFd(type);
    this.#seq = (this.#seq + 1) >>> 0;
    const seq = this.#seq;
    const msg = encodeMessage({ type, flags, seq, pid: 0 }, payload);
    const sent = libc.sendto(fd, Buffer.from(msg.buffer, msg.byteOffset, msg.length), 0, this.#kernel);
    if (sent !== msg.length) throw new NetlinkProtocolError(`sent ${sent} of ${msg.length} bytes`);
    return seq;
  }

  /** Reads one datagram, growing the buffer first if it would not fit, and returns a copy's messages. */
  #receive(type: number, deadline: number): NetlinkMessage[] {
    const fd = this.#openFd(type);
    if (Date.now() > deadline) throw new libc.KernelError(rtmTypeName(type), constants.errno.ETIMEDOUT);
    const got = receiveDatagram(fd, this.#buf, rtmTypeName(type));
    this.#buf = got.buf;
    return got.messages;
  }

  #openFd(type: number): number {
    if (this.#fd < 0) throw new NetlinkClosedError(rtmTypeName(type));
    return this.#fd;
  }

  /** Closes the socket; calling it again does nothing. */
  /**
   * Closes the socket; calling it again does nothing. Every later call fails at once. When a worker
   * thread is inside `sendto` on it (requestAsync), the descriptor itself is closed when that call
   * returns: closed earlier, its number could be reused and the worker would send on someone else's
   * socket (docs/architecture.md, failure 1).
   */
  close(): void {
    const fd = this.#fd;
    if (fd < 0) return;
    this.#fd = -1;
    this.#worker.close(fd);
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/**
 * A bound netlink socket of `protocol` in the calling thread's current network namespace, with
 * extended acks, capped acks (errors need not echo the whole request: the extended ack already points
 * into it) and a receive timeout. Closed again when any step fails.
 */
export function openNetlinkFd(protocol: number, receiveTimeoutMs: number): number {
  const fd = libc.socket(libc.AF_NETLINK, libc.SOCK_RAW, protocol);
  try {
    libc.setsockoptInt(fd, libc.SOL_NETLINK, N.NETLINK_EXT_ACK, 1);
    libc.setsockoptInt(fd, libc.SOL_NETLINK, N.NETLINK_CAP_ACK, 1);
    libc.setReceiveTimeout(fd, receiveTimeoutMs);
    libc.bind(fd, sockaddrNl());
    return fd;
  } catch (err) {
    libc.close(fd);
    throw err;
  }
}

/**
 * Reads one netlink datagram on `fd` into `buf`, growing it first (a new buffer is returned) when the
 * datagram would not fit, and decodes a copy of it: the buffer is reused by the next receive while
 * these messages may still be read. A receive timeout (EAGAIN) becomes ETIMEDOUT named after `what`;
 * with `flags` MSG_DONTWAIT, EAGAIN stays EAGAIN: nothing was queued.
 */
export function receiveDatagram(
  fd: number,
  buf: Buffer,
  what: string,
  flags = 0,
): { buf: Buffer; messages: NetlinkMessage[] } {
  try {
    const size = libc.recv(fd, buf, flags | MSG_PEEK | MSG_TRUNC);
    const into = size > buf.length ? Buffer.allocUnsafe(size) : buf;
    const n = libc.recv(fd, into, flags);
    return { buf: into, messages: decodeMessages(new Uint8Array(into.subarray(0, n))) };
  } catch (err) {
    const nonBlocking = (flags & libc.MSG_DONTWAIT) !== 0;
    if (!nonBlocking && err instanceof libc.KernelError && err.errno === constants.errno.EAGAIN) {
      throw new libc.KernelError(what, constants.errno.ETIMEDOUT, undefined, { cause: err });
    }
    throw err;
  }
}
