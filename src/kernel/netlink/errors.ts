/**
 * Failures of the netlink layer that are not an errno from the kernel (those are `KernelError`s,
 * see ../libc.ts). Callers branch on the class; the code maps them at the CNI boundary.
 */
import { PodwireError } from '../../base/errors.js';

/** Any call on an `Rtnetlink` (or its socket) after `close()`. */
export class NetlinkClosedError extends PodwireError {
  constructor(operation: string) {
    super('ERR_INTERNAL', `${operation}: the netlink socket is closed`);
  }
}

/** Bytes that do not parse as netlink: a truncated header, an attribute running past its parent. */
export class NetlinkProtocolError extends PodwireError {
  constructor(message: string) {
    super('ERR_KERNEL', `netlink: ${message}`);
  }
}
