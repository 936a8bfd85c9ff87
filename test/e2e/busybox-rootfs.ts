/**
 * A container root file system for `podman run --rootfs`: a statically linked busybox as /bin/busybox
 * and one symlink per applet, so that `sh`, `ip`, `ping` and `sleep` exist without an image or a
 * registry. A dynamically linked busybox would need the host's loader and libc inside the root.
 */
import { closeSync, copyFileSync, existsSync, mkdirSync, openSync, readSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { must } from '../../bed/exec.js';

/** Where Debian's busybox-static installs the binary (usrmerge makes both paths the same file). */
const CANDIDATES = ['/bin/busybox', '/usr/bin/busybox'];
const PT_INTERP = 3;

export function findBusybox(): string | undefined {
  return CANDIDATES.find((p) => existsSync(p));
}

/**
 * True when the ELF file at `path` has no PT_INTERP program header, i.e. needs no dynamic loader.
 * Reads only the 64-bit little-endian layout (the machines this runs on); anything else is "not static".
 */
export function isStaticElf(path: string): boolean {
  const fd = openSync(path, 'r');
  try {
    const header = Buffer.alloc(64);
    if (readSync(fd, header, 0, 64, 0) !== 64) return false;
    // e_ident: "\x7fELF", EI_CLASS 2 (64-bit), EI_DATA 1 (little-endian).
    if (header.readUInt32BE(0) !== 0x7f454c46 || header[4] !== 2 || header[5] !== 1) return false;
    const phoff = Number(header.readBigUInt64LE(0x20));
    const phentsize = header.readUInt16LE(0x36);
    const phnum = header.readUInt16LE(0x38);
    const table = Buffer.alloc(phentsize * phnum);
    if (readSync(fd, table, 0, table.length, phoff) !== table.length) return false;
    for (let i = 0; i < phnum; i++) if (table.readUInt32LE(i * phentsize) === PT_INTERP) return false;
    return true;
  } finally {
    closeSync(fd);
  }
}

/** Builds the root under `dir` (created) from the busybox at `busybox`; returns `dir`. */
export async function makeBusyboxRootfs(dir: string, busybox: string): Promise<string> {
  const bin = join(dir, 'bin');
  mkdirSync(bin, { recursive: true });
  for (const d of ['proc', 'sys', 'dev', 'etc', 'tmp', 'run']) mkdirSync(join(dir, d), { recursive: true });
  copyFileSync(busybox, join(bin, 'busybox'));
  const applets = (await must(busybox, ['--list'])).split('\n').filter((a) => a !== '' && a !== 'busybox');
  for (const applet of applets) symlinkSync('busybox', join(bin, applet));
  return dir;
}
