/**
 * AF_PACKET sockets for sending whole Ethernet frames (gratuitous ARP, unsolicited NA). A socket is
 * bound to the namespace it was created in: create it with `inNetns` for a pod interface.
 */

import { constants } from 'node:os';
import { OwnedFd } from '../base/owned-fd.js';
import {
  AF_PACKET,
  bind,
  close,
  closeAsync,
  KernelError,
  MSG_DONTWAIT,
  recv,
  SOCK_RAW,
  sendto,
  setsockoptBytes,
  socket,
} from './libc.js';

/** linux/socket.h, linux/if_packet.h */
const SOL_PACKET = 263;
const PACKET_ADD_MEMBERSHIP = 1;
const PACKET_MR_PROMISC = 1;

const EAGAIN = constants.errno.EAGAIN;

/** struct sockaddr_ll (linux/if_packet.h). */
function sockaddrLl(ifindex: number, protocol: number): Buffer {
  const sa = Buffer.alloc(20);
  sa.writeUInt16LE(AF_PACKET, 0);
  sa.writeUInt16BE(protocol, 2);
  sa.writeInt32LE(ifindex, 4);
  return sa;
}

/**
 * A receiving packet socket on one interface for one ethertype (e.g. ETH_P_ARP), for captures: frames
 * queue in the socket until `drain` reads them without blocking.
 */
export class CaptureSocket implements Disposable {
  readonly #fd: OwnedFd;
  readonly #buf = Buffer.allocUnsafe(65536);

  private constructor(fd: number) {
    this.#fd = new OwnedFd(fd, 'capture socket', close);
  }

  /** Equivalent to: socket(AF_PACKET, SOCK_RAW, htons(ethertype)) bound to `ifindex`. */
  static open(ifindex: number, ethertype: number): CaptureSocket {
    const proto = ((ethertype & 0xff) << 8) | (ethertype >> 8); // htons
    const fd = socket(AF_PACKET, SOCK_RAW, proto);
    try {
      bind(fd, sockaddrLl(ifindex, ethertype));
    } catch (err) {
      close(fd);
      throw err;
    }
    return new CaptureSocket(fd);
  }

  /**
   * Puts the interface in promiscuous mode for as long as this socket is open (the kernel counts the
   * membership and drops it on close), so that a capture on a bridge device also sees unicast frames
   * forwarded between its ports. Equivalent to what `tcpdump` does without `-p`.
   */
  promiscuous(ifindex: number): void {
    const mreq = Buffer.alloc(16); // struct packet_mreq
    mreq.writeInt32LE(ifindex, 0);
    mreq.writeUInt16LE(PACKET_MR_PROMISC, 4);
    setsockoptBytes(this.#fd.fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq);
  }

  /** Every frame queued now (copies), without waiting for more. */
  drain(): Buffer[] {
    const fd = this.#fd.fd;
    const frames: Buffer[] = [];
    for (;;) {
      let n: number;
      try {
        n = recv(fd, this.#buf, MSG_DONTWAIT);
      } catch (err) {
        if (err instanceof KernelError && err.errno === EAGAIN) return frames;
        throw err;
      }
      frames.push(Buffer.from(this.#buf.subarray(0, Math.min(n, this.#buf.length))));
    }
  }

  close(): void {
    this.#fd.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/** A send-only packet socket on one interface; protocol 0 so the kernel never queues frames to it. */
export class PacketSocket implements Disposable {
  readonly ifindex: number;
  readonly #fd: OwnedFd;
  readonly #dest: Buffer;

  private constructor(fd: number, ifindex: number) {
    this.#fd = new OwnedFd(fd, 'packet socket', close);
    this.ifindex = ifindex;
    this.#dest = sockaddrLl(ifindex, 0);
  }

  /** Equivalent to: socket(AF_PACKET, SOCK_RAW, 0) bound to `ifindex`. */
  static open(ifindex: number): PacketSocket {
    const fd = socket(AF_PACKET, SOCK_RAW, 0);
    try {
      bind(fd, sockaddrLl(ifindex, 0));
    } catch (err) {
      close(fd);
      throw err;
    }
    return new PacketSocket(fd, ifindex);
  }

  /** Sends one complete Ethernet frame. */
  send(frame: Buffer): void {
    sendto(this.#fd.fd, frame, 0, this.#dest);
  }

  close(): void {
    this.#fd.close();
  }

  /** Closes on a worker thread (see `closeAsync` in libc.ts); the socket is unusable at once. */
  closeAsync(): Promise<void> {
    if (this.#fd.closed) return Promise.resolve();
    return closeAsync(this.#fd.release());
  }

  [Symbol.dispose](): void {
    this.close();
  }
}
