/**
 * The few libc calls podwire makes, through koffi. Every wrapper is synchronous, runs on the calling
 * (main) thread, and throws a `KernelError` carrying the errno on failure. Buffers passed as `void *`
 * are handed to the kernel by reference, without a copy.
 */
import { constants } from 'node:os';
import koffi from 'koffi';
import { PodwireError } from '../base/errors.js';

const libc = koffi.load('libc.so.6');

const c = {
  socket: libc.func('int socket(int domain, int type, int protocol)'),
  bind: libc.func('int bind(int fd, const void *addr, uint32_t len)'),
  sendto: libc.func(
    'intptr_t sendto(int fd, const void *buf, size_t len, int flags, const void *addr, uint32_t alen)',
  ),
  recv: libc.func('intptr_t recv(int fd, void *buf, size_t len, int flags)'),
  setsockopt: libc.func('int setsockopt(int fd, int level, int name, const void *val, uint32_t len)'),
  close: libc.func('int close(int fd)'),
  setns: libc.func('int setns(int fd, int nstype)'),
  ioctl: libc.func('int ioctl(int fd, unsigned long request, ...)'),
  malloc_trim: libc.func('int malloc_trim(size_t pad)'),
  flock: libc.func('int flock(int fd, int operation)'),
};

const errnoNames = new Map<number, string>(Object.entries(constants.errno).map(([name, n]) => [n, name]));

export function errnoName(errno: number): string {
  return errnoNames.get(errno) ?? `errno ${errno}`;
}

/** A failed syscall or a netlink error answer: keeps the errno and the kernel's extended-ack text. */
export class KernelError extends PodwireError {
  readonly errno: number;
  readonly syscall: string;
  readonly extack: string | undefined;

  constructor(syscall: string, errno: number, extack?: string, options?: { cause?: unknown }) {
    const ext = extack ? ` (${extack})` : '';
    super('ERR_KERNEL', `${syscall}: ${errnoName(errno)}${ext}`, options);
    this.errno = errno;
    this.syscall = syscall;
    this.extack = extack;
  }

  get errnoName(): string {
    return errnoName(this.errno);
  }
}

export const AF_UNIX = 1;
export const AF_INET = 2;
export const AF_INET6 = 10;

/** The address family constant of IP version 4 or 6. */
export function inetFamily(family: 4 | 6): typeof AF_INET | typeof AF_INET6 {
  return family === 4 ? AF_INET : AF_INET6;
}
export const AF_NETLINK = 16;
export const AF_PACKET = 17;
export const SOCK_STREAM = 1;
export const SOCK_DGRAM = 2;
export const SOCK_RAW = 3;
export const SOCK_CLOEXEC = 0o2000000;
export const SOL_SOCKET = 1;
export const SO_SNDBUF = 7;
export const SO_RCVBUF = 8;
/** Like SO_SNDBUF, past net.core.wmem_max (CAP_NET_ADMIN). */
export const SO_SNDBUFFORCE = 32;
export const SO_RCVTIMEO = 20;
export const SOL_NETLINK = 270;
export const NETLINK_EXT_ACK = 11;
export const NETLINK_GET_STRICT_CHK = 12;
export const CLONE_NEWNET = 0x40000000;
export const MSG_DONTWAIT = 0x40;

function check(name: string, ret: number | bigint): number {
  const n = Number(ret);
  if (n < 0) throw new KernelError(name, koffi.errno());
  return n;
}

/** Equivalent to socket(2), always with SOCK_CLOEXEC so no descriptor leaks into child processes. */
export function socket(domain: number, type: number, protocol: number): number {
  return check('socket', c.socket(domain, type | SOCK_CLOEXEC, protocol) as number);
}

export function bind(fd: number, addr: Buffer): void {
  check('bind', c.bind(fd, addr, addr.length) as number);
}

/** Sends one datagram; retries EINTR. Returns the number of bytes sent. */
export function sendto(fd: number, buf: Buffer, flags: number, addr: Buffer | null): number {
  for (;;) {
    const n = Number(c.sendto(fd, buf, buf.length, flags, addr, addr ? addr.length : 0));
    if (n >= 0) return n;
    const errno = koffi.errno();
    if (errno !== constants.errno.EINTR) throw new KernelError('sendto', errno);
  }
}

/** Receives one datagram into `buf`; retries EINTR. Returns the datagram length (may exceed buf with MSG_TRUNC). */
/**
 * sendto(2) on a libuv worker thread. rtnetlink does a request's work inside sendto, in the sender's
 * context; for requests that wait in the kernel (deleting a link waits for RCU), this keeps the main
 * thread free. The socket stays bound to its own namespace whatever thread sends on it.
 */
export function sendtoAsync(fd: number, buf: Buffer, flags: number, addr: Buffer | null): Promise<number> {
  return new Promise((resolve, reject) => {
    c.sendto.async(
      fd,
      buf,
      buf.length,
      flags,
      addr,
      addr ? addr.length : 0,
      (err: unknown, ret: number | bigint) => {
        const n = Number(ret);
        if (err) reject(err);
        else if (n < 0) reject(new KernelError('sendto', koffi.errno()));
        else resolve(n);
      },
    );
  });
}

export function recv(fd: number, buf: Buffer, flags: number): number {
  for (;;) {
    const n = Number(c.recv(fd, buf, buf.length, flags));
    if (n >= 0) return n;
    const errno = koffi.errno();
    if (errno !== constants.errno.EINTR) throw new KernelError('recv', errno);
  }
}

export function setsockoptInt(fd: number, level: number, name: number, value: number): void {
  const v = Buffer.alloc(4);
  v.writeInt32LE(value);
  check('setsockopt', c.setsockopt(fd, level, name, v, 4) as number);
}

/** setsockopt with a struct given as bytes (e.g. struct packet_mreq). */
export function setsockoptBytes(fd: number, level: number, name: number, value: Buffer): void {
  check('setsockopt', c.setsockopt(fd, level, name, value, value.length) as number);
}

/** SO_RCVTIMEO takes a struct timeval: a blocking recv fails with EAGAIN after `ms`. */
export function setReceiveTimeout(fd: number, ms: number): void {
  const tv = Buffer.alloc(16);
  tv.writeBigInt64LE(BigInt(Math.floor(ms / 1000)), 0);
  tv.writeBigInt64LE(BigInt((ms % 1000) * 1000), 8);
  check('setsockopt(SO_RCVTIMEO)', c.setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, tv, tv.length) as number);
}

/** Equivalent to close(2). EINTR still releases the descriptor on Linux, so it is not retried. */
export function close(fd: number): void {
  const ret = c.close(fd) as number;
  if (ret < 0) {
    const errno = koffi.errno();
    if (errno !== constants.errno.EINTR) throw new KernelError('close', errno);
  }
}

/**
 * Equivalent to close(2), run on a libuv worker thread. Closing a packet socket waits for an RCU grace
 * period in the kernel (packet_release -> synchronize_net, ~10 ms here); off the main thread, that
 * wait no longer stalls every other request. Close does not depend on the thread's namespace.
 */
export function closeAsync(fd: number): Promise<void> {
  return new Promise((resolve, reject) => {
    c.close.async(fd, (err: unknown, ret: number) => {
      if (err) reject(err);
      else if (ret < 0) reject(new KernelError('close', koffi.errno()));
      else resolve();
    });
  });
}

/**
 * Equivalent to ioctl(2); `args` are koffi's variadic (type, value) pairs, e.g. 'void *', buf.
 * Returns the result; a negative one is the caller's to turn into a `KernelError` with koffi.errno().
 */
export function ioctl(fd: number, request: number, ...args: unknown[]): number {
  return Number(c.ioctl(fd, request, ...args));
}

/** Equivalent to setns(2): moves the calling thread only into the namespace behind `fd`. */
export function setns(fd: number, nstype: number): void {
  check('setns', c.setns(fd, nstype) as number);
}

/**
 * Equivalent to malloc_trim(3) with pad 0: glibc returns to the kernel the free memory of every malloc
 * arena, pages inside the heap included (MADV_DONTNEED), not only the top of the main heap that
 * free() itself gives back. Returns whether any memory was released.
 */
export function mallocTrim(): boolean {
  return (c.malloc_trim(0) as number) === 1;
}

export const LOCK_EX = 2;
export const LOCK_NB = 4;

/**
 * Equivalent to flock(fd, LOCK_EX | LOCK_NB): an exclusive lock on the open file, held until the
 * descriptor is closed (or the process dies). Returns false when another open file holds it.
 */
export function tryLockExclusive(fd: number): boolean {
  for (;;) {
    if ((c.flock(fd, LOCK_EX | LOCK_NB) as number) === 0) return true;
    const errno = koffi.errno();
    if (errno === constants.errno.EWOULDBLOCK) return false;
    if (errno !== constants.errno.EINTR) throw new KernelError('flock', errno);
  }
}
