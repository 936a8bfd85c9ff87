/**
 * sysctl through /proc/sys. A /proc/sys/net file is bound to the network namespace of the thread that
 * opens it, so writing a pod's sysctl is `inNetns(pod, home, () => writeSysctl(...))`.
 */
import { closeSync, openSync, writeSync } from 'node:fs';
import { InternalError } from '../base/errors.js';

/** Writes a sysctl in one fixed namespace; lets components be run against a test namespace. */
export type SysctlWriter = (key: string, value: string) => void;

const IFNAME = /^[^/\s:]{1,15}$/;

function procPath(key: string): string {
  // Keys use '/' separators so that interface names with dots stay unambiguous.
  if (key.includes('..') || key.startsWith('/')) throw new InternalError(`bad sysctl key ${key}`);
  return `/proc/sys/${key}`;
}

/** Equivalent to: `sysctl -w key=value` (key written with '/' separators). */
export function writeSysctl(key: string, value: string): void {
  const fd = openSync(procPath(key), 'w');
  try {
    writeSync(fd, `${value}\n`);
  } finally {
    closeSync(fd);
  }
}

/** The per-interface sysctl key, e.g. `ifaceSysctl(4, 'podwire0', 'arp_announce')`. */
export function ifaceSysctl(family: 4 | 6, ifname: string, name: string): string {
  if (!IFNAME.test(ifname)) throw new InternalError(`bad interface name ${ifname}`);
  return `net/ipv${family}/conf/${ifname}/${name}`;
}
