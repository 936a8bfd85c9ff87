/**
 * A NETLINK_NETFILTER socket bound to one nfnetlink_log group: the packets that nftables' `log group
 * G` rules send to userspace. Bound to the namespace the calling thread is in when `open()` runs (a
 * group is per network namespace); closing the socket unbinds the group (the kernel drops a closed
 * socket's instances).
 *
 * Reading never blocks: `drain` takes what is queued, at most `maxDatagrams` per call, with
 * MSG_DONTWAIT. The kernel's receive buffer bounds what waits; when it overflowed, the kernel reports
 * ENOBUFS once and the packets it could not queue are gone: `drain` counts that as an overrun.
 */
import { constants } from 'node:os';
import * as libc from '../libc.js';
import { encodeMessage, type NetlinkMessage } from './codec.js';
import { NetlinkClosedError, NetlinkProtocolError } from './errors.js';
import {
  decodeNflogPacket,
  encodeNflogConfig,
  NFULNL_CONFIG_TYPE,
  NFULNL_PACKET_TYPE,
  type NflogBind,
  type NflogPacket,
} from './nfulnl-message.js';
import { decodeNlMsgErr } from './nlmsgerr.js';
import { openNetlinkFd, receiveDatagram, sockaddrNl } from './socket.js';
import * as N from './uapi/netlink.js';
import { NETLINK_NETFILTER } from './uapi/nfnetlink.js';
import { NFULNL_CFG_CMD_BIND } from './uapi/nfnetlink-log.js';

export interface NflogDrain {
  packets: NflogPacket[];
  /** The kernel reported a receive-buffer overrun (ENOBUFS) during this drain: packets were lost. */
  overruns: number;
  /** Messages that did not decode (skipped). */
  malformed: number;
}

export class NflogSocket implements Disposable {
  #fd: number;
  readonly group: number;
  #buf: Buffer = Buffer.allocUnsafe(64 * 1024);

  private constructor(fd: number, group: number) {
    this.#fd = fd;
    this.group = group;
  }

  /**
   * Equivalent to what `ulogd` does with NFLOG group G: a NETLINK_NETFILTER socket in the calling
   * thread's current network namespace, NFULNL_CFG_CMD_BIND of the group, copy mode packet with
   * `copyRange` bytes, the queue threshold and flush timeout; one config request, acked. A group bound
   * by another socket fails (EPERM) and closes this one.
   */
  static open(bind: NflogBind, options: { receiveTimeoutMs?: number } = {}): NflogSocket {
    const fd = openNetlinkFd(NETLINK_NETFILTER, options.receiveTimeoutMs ?? 5000);
    const sock = new NflogSocket(fd, bind.group);
    try {
      sock.#configure(encodeNflogConfig(NFULNL_CFG_CMD_BIND, bind.group, bind));
      return sock;
    } catch (err) {
      sock.close();
      throw err;
    }
  }

  /** Sends one config request with NLM_F_ACK and waits for its ack (packets read meanwhile are dropped). */
  #configure(payload: Uint8Array): void {
    const fd = this.#openFd();
    const seq = Date.now() >>> 0;
    const msg = encodeMessage(
      { type: NFULNL_CONFIG_TYPE, flags: N.NLM_F_REQUEST | N.NLM_F_ACK, seq, pid: 0 },
      payload,
    );
    const sent = libc.sendto(fd, Buffer.from(msg.buffer, msg.byteOffset, msg.length), 0, sockaddrNl());
    if (sent !== msg.length) throw new NetlinkProtocolError(`sent ${sent} of ${msg.length} bytes`);
    for (;;) {
      for (const m of this.#receive(0)) {
        if (m.header.type !== N.NLMSG_ERROR || m.header.seq !== seq) continue;
        const e = decodeNlMsgErr(m);
        if (e.error !== 0)
          throw new libc.KernelError(`NFULNL_MSG_CONFIG group ${this.group}`, -e.error, e.extack.msg);
        return;
      }
    }
  }

  /**
   * The packets queued now, from at most `maxDatagrams` datagrams (the kernel may put several packets
   * in one); never waits.
   */
  drain(maxDatagrams: number): NflogDrain {
    const out: NflogDrain = { packets: [], overruns: 0, malformed: 0 };
    for (let i = 0; i < maxDatagrams; i++) {
      let messages: NetlinkMessage[];
      try {
        messages = this.#receive(libc.MSG_DONTWAIT);
      } catch (err) {
        if (err instanceof libc.KernelError && err.errno === constants.errno.EAGAIN) break;
        if (err instanceof libc.KernelError && err.errno === constants.errno.ENOBUFS) {
          out.overruns++;
          continue;
        }
        if (err instanceof NetlinkProtocolError) {
          out.malformed++;
          continue;
        }
        throw err;
      }
      for (const m of messages) {
        if (m.header.type !== NFULNL_PACKET_TYPE) continue; // NLMSG_DONE after a batch of packets
        try {
          out.packets.push(decodeNflogPacket(m));
        } catch (err) {
          // A message this codec cannot read is skipped and counted; the next one may be fine.
          if (!(err instanceof NetlinkProtocolError)) throw err;
          out.malformed++;
        }
      }
    }
    return out;
  }

  /** One datagram; a blocking receive (flags 0) times out with the socket's receive timeout. */
  #receive(flags: number): NetlinkMessage[] {
    const got = receiveDatagram(this.#openFd(), this.#buf, `nfnetlink_log group ${this.group}`, flags);
    this.#buf = got.buf;
    return got.messages;
  }

  #openFd(): number {
    if (this.#fd < 0) throw new NetlinkClosedError('nfnetlink_log');
    return this.#fd;
  }

  get closed(): boolean {
    return this.#fd < 0;
  }

  /** Closes the socket, which unbinds the group; calling it again does nothing. */
  close(): void {
    const fd = this.#fd;
    if (fd < 0) return;
    this.#fd = -1;
    libc.close(fd);
  }

  [Symbol.dispose](): void {
    this.close();
  }
}
