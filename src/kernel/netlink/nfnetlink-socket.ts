/**
 * One NETLINK_NETFILTER socket, for nf_tables (nfnetlink(7) has no man page; the protocol is
 * linux/netfilter/nfnetlink.h): every message starts with struct nfgenmsg, and changes travel in a
 * batch (BEGIN, messages, END) that the kernel commits as one transaction, all of it or none. Like
 * `NetlinkSocket`, it is bound to the namespace the calling thread is in when `open()` runs.
 */
import { constants } from 'node:os';
import * as libc from '../libc.js';
import { concatBytes, encodeMessage, type NetlinkMessage } from './codec.js';
import { NetlinkClosedError, NetlinkProtocolError } from './errors.js';
import { decodeDone, decodeNlMsgErr } from './nlmsgerr.js';
import { openNetlinkFd, receiveDatagram, sockaddrNl, WorkerSends } from './socket.js';
import * as N from './uapi/netlink.js';
import { nftMsgName } from './uapi/nf-tables.js';
import {
  NETLINK_NETFILTER,
  NFGENMSG_LEN,
  NFNETLINK_V0,
  NFNL_MSG_BATCH_BEGIN,
  NFNL_MSG_BATCH_END,
  NFNL_SUBSYS_NFTABLES,
} from './uapi/nfnetlink.js';

/** struct nfgenmsg followed by the message's attributes. */
export function nfgenPayload(family: number, attrs: Uint8Array, resId = 0): Uint8Array {
  const out = new Uint8Array(NFGENMSG_LEN + attrs.length);
  out[0] = family;
  out[1] = NFNETLINK_V0;
  new DataView(out.buffer).setUint16(2, resId, false);
  out.set(attrs, NFGENMSG_LEN);
  return out;
}

/** One nf_tables message of a batch: `type` is NFT_MSG_*, `attrs` encoded attributes. */
export interface NftBatchMessage {
  type: number;
  flags: number;
  family: number;
  attrs: Uint8Array;
}

export class NfnetlinkSocket implements Disposable {
  #fd: number;
  #seq: number;
  #buf: Buffer = Buffer.allocUnsafe(64 * 1024);
  readonly #timeoutMs: number;
  readonly #kernel = sockaddrNl();
  /** What the send buffer is known to hold at least (net.core.wmem_default is 208 KiB). */
  #sendBuffer = 128 * 1024;
  /** `sendto` calls on worker threads (one at a time: batchAsync queues them). */
  readonly #worker = new WorkerSends();
  /** Settles when the last queued `batchAsync` has; never rejects. */
  #asyncTail: Promise<void> = Promise.resolve();

  private constructor(fd: number, timeoutMs: number) {
    this.#fd = fd;
    this.#timeoutMs = timeoutMs;
    this.#seq = Date.now() >>> 0;
  }

  /** Opens a NETLINK_NETFILTER socket in the calling thread's current network namespace. */
  static open(options: { receiveTimeoutMs?: number } = {}): NfnetlinkSocket {
    const timeoutMs = options.receiveTimeoutMs ?? 5000;
    return new NfnetlinkSocket(openNetlinkFd(NETLINK_NETFILTER, timeoutMs), timeoutMs);
  }

  get closed(): boolean {
    return this.#fd < 0;
  }

  /**
   * Sends the messages as one batch, in one datagram, each with NLM_F_ACK, and waits for every ack.
   * The kernel applies all of them or none; the first error is thrown, named after its message.
   */
  batch(messages: readonly NftBatchMessage[]): void {
    if (messages.length === 0) return;
    this.#idle('batch');
    const fd = this.#openFd();
    const { datagram, pending } = this.#encodeBatch(fd, messages);
    const sent = libc.sendto(fd, datagram, 0, this.#kernel);
    this.#acks(datagram.length, sent, pending);
  }

  /**
   * `batch` with the `sendto` on a worker thread: the kernel commits the whole batch inside that call
   * (seconds for a big change of an interval set, decision 54), and the event loop goes on meanwhile.
   * Batches are queued, one in flight; while one is, the socket's synchronous calls throw (they would
   * read its acks), so give these a socket of their own or wait for them.
   */
  batchAsync(messages: readonly NftBatchMessage[]): Promise<void> {
    const run = async (): Promise<void> => {
      if (messages.length === 0) return;
      const fd = this.#openFd();
      const { datagram, pending } = this.#encodeBatch(fd, messages);
      const sent = await this.#worker.sendto(fd, datagram, this.#kernel);
      this.#acks(datagram.length, sent, pending);
    };
    const result = this.#asyncTail.then(run, run);
    this.#asyncTail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }

  /** The batch's datagram (BEGIN, the messages with NLM_F_ACK, END), the send buffer grown to fit. */
  #encodeBatch(
    fd: number,
    messages: readonly NftBatchMessage[],
  ): { datagram: Buffer; pending: Map<number, number> } {
    const parts: Uint8Array[] = [];
    const pending = new Map<number, number>();
    const next = () => {
      this.#seq = (this.#seq + 1) >>> 0;
      return this.#seq;
    };
    const batchHeader = (type: number) =>
      encodeMessage(
        { type, flags: N.NLM_F_REQUEST, seq: next(), pid: 0 },
        nfgenPayload(0, new Uint8Array(0), NFNL_SUBSYS_NFTABLES),
      );
    parts.push(batchHeader(NFNL_MSG_BATCH_BEGIN));
    for (const m of messages) {
      const seq = next();
      const type = (NFNL_SUBSYS_NFTABLES << 8) | m.type;
      pending.set(seq, type);
      parts.push(
        encodeMessage(
          { type, flags: m.flags | N.NLM_F_REQUEST | N.NLM_F_ACK, seq, pid: 0 },
          nfgenPayload(m.family, m.attrs),
        ),
      );
    }
    parts.push(batchHeader(NFNL_MSG_BATCH_END));
    const bytes = concatBytes(parts);
    this.#fitSendBuffer(fd, bytes.length);
    return { datagram: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length), pending };
  }

  /** Reads the batch's acks (`pending`: sequence number -> message type); throws the first error. */
  #acks(length: number, sent: number, pending: Map<number, number>): void {
    if (sent !== length) throw new NetlinkProtocolError(`sent ${sent} of ${length} bytes`);
    const deadline = Date.now() + this.#timeoutMs;
    while (pending.size > 0) {
      for (const m of this.#receive(deadline)) {
        if (m.header.type !== N.NLMSG_ERROR) continue;
        const type = pending.get(m.header.seq);
        if (type === undefined) continue; // an answer to an earlier batch that timed out
        pending.delete(m.header.seq);
        const e = decodeNlMsgErr(m);
        // The kernel aborted the whole batch: the other messages' acks no longer matter.
        if (e.error !== 0) throw new libc.KernelError(nftMsgName(type), -e.error, e.extack.msg);
      }
    }
  }

  /** A synchronous call while a worker thread's batch is in flight would read that batch's acks. */
  #idle(what: string): void {
    if (this.#worker.busy)
      throw new Error(`nfnetlink ${what}: a batch is in flight on this socket (batchAsync)`);
  }

  /**
   * A batch is one datagram (the kernel commits one datagram's batch), and netlink refuses a datagram
   * larger than the socket's send buffer (EMSGSIZE): grow it to fit, as `nft` does for big rulesets.
   */
  #fitSendBuffer(fd: number, length: number): void {
    if (length + 4096 <= this.#sendBuffer) return;
    const want = 2 ** Math.ceil(Math.log2(length + 4096));
    try {
      libc.setsockoptInt(fd, libc.SOL_SOCKET, libc.SO_SNDBUFFORCE, want);
    } catch {
      libc.setsockoptInt(fd, libc.SOL_SOCKET, libc.SO_SNDBUF, want);
    }
    this.#sendBuffer = want;
  }

  /** A GET request without NLM_F_DUMP (e.g. named set elements): its answers, until the ack. */
  request(type: number, family: number, attrs: Uint8Array): NetlinkMessage[] {
    this.#idle(nftMsgName((NFNL_SUBSYS_NFTABLES << 8) | type));
    const fullType = (NFNL_SUBSYS_NFTABLES << 8) | type;
    const seq = this.#send(fullType, N.NLM_F_REQUEST | N.NLM_F_ACK, nfgenPayload(family, attrs));
    const replies: NetlinkMessage[] = [];
    const deadline = Date.now() + this.#timeoutMs;
    for (;;) {
      for (const m of this.#receive(deadline)) {
        if (m.header.seq !== seq) continue;
        if (m.header.type === N.NLMSG_ERROR) {
          const e = decodeNlMsgErr(m);
          if (e.error !== 0) throw new libc.KernelError(nftMsgName(type), -e.error, e.extack.msg);
          return replies;
        }
        if (m.header.type !== N.NLMSG_NOOP) replies.push(m);
      }
    }
  }

  /** A dump (NLM_F_DUMP): every message until NLMSG_DONE; an interrupted dump is retried. */
  dump(type: number, family: number, attrs: Uint8Array): NetlinkMessage[] {
    this.#idle(nftMsgName((NFNL_SUBSYS_NFTABLES << 8) | type));
    const fullType = (NFNL_SUBSYS_NFTABLES << 8) | type;
    for (let attempt = 0; ; attempt++) {
      const seq = this.#send(fullType, N.NLM_F_REQUEST | N.NLM_F_DUMP, nfgenPayload(family, attrs));
      const out: NetlinkMessage[] = [];
      let interrupted = false;
      const deadline = Date.now() + this.#timeoutMs;
      let done = false;
      while (!done) {
        for (const m of this.#receive(deadline)) {
          if (m.header.seq !== seq) continue;
          if ((m.header.flags & N.NLM_F_DUMP_INTR) !== 0) interrupted = true;
          if (m.header.type === N.NLMSG_DONE) {
            const d = decodeDone(m);
            if (d.error !== 0) throw new libc.KernelError(nftMsgName(type), -d.error, d.extack.msg);
            done = true;
          } else if (m.header.type === N.NLMSG_ERROR) {
            const e = decodeNlMsgErr(m);
            if (e.error !== 0) throw new libc.KernelError(nftMsgName(type), -e.error, e.extack.msg);
            done = true;
          } else if (m.header.type !== N.NLMSG_NOOP) out.push(m);
        }
      }
      if (!interrupted) return out;
      if (attempt >= 5) throw new libc.KernelError(nftMsgName(type), constants.errno.EINTR);
    }
  }

  #send(type: number, flags: number, payload: Uint8Array): number {
    const fd = this.#openFd();
    this.#seq = (this.#seq + 1) >>> 0;
    const seq = this.#seq;
    const msg = encodeMessage({ type, flags, seq, pid: 0 }, payload);
    const sent = libc.sendto(fd, Buffer.from(msg.buffer, msg.byteOffset, msg.length), 0, this.#kernel);
    if (sent !== msg.length) throw new NetlinkProtocolError(`sent ${sent} of ${msg.length} bytes`);
    return seq;
  }

  #receive(deadline: number): NetlinkMessage[] {
    const fd = this.#openFd();
    if (Date.now() > deadline) throw new libc.KernelError('recv', constants.errno.ETIMEDOUT);
    const got = receiveDatagram(fd, this.#buf, 'recv');
    this.#buf = got.buf;
    return got.messages;
  }

  #openFd(): number {
    if (this.#fd < 0) throw new NetlinkClosedError('nfnetlink');
    return this.#fd;
  }

  /**
   * Closes the socket; calling it again does nothing. When a worker thread is inside `sendto` on it
   * (batchAsync), the descriptor itself is closed when that call returns: closed earlier, its number
   * could be reused and the worker would send on someone else's descriptor.
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
