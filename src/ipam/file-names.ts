/**
 * File names of the FileStore layout:
 *
 *   <dir>/<range dir>/<address file>     one file per claim, content = JSON AllocationRecord
 *   <dir>/<range dir>/.tmp-<pid>-<hex>   a record being written; never a claim
 *
 * Range dir: the range id with '/' written as '_' and ':' as '-', [A-Za-z0-9.] kept, and every
 * other byte (and a leading '.') percent-encoded, so that the mapping is injective and the name
 * is never '.', '..' or hidden: "10.244.1.0/24" -> "10.244.1.0_24",
 * "fd00:10:244:1::/64" -> "fd00-10-244-1--_64".
 * Address file: the canonical address text (ip.ts) with ':' written as '_' for portability:
 * "10.244.1.5", "fd00_10_244_1__5". Names that do not decode to a canonical address are not claims.
 */

import { randomBytes } from 'node:crypto';
import { InvalidConfigError } from '../base/errors.js';
import { canonicalIp, parseIp } from '../base/ip.js';

const NAME_MAX = 255;
const KEPT = /[A-Za-z0-9.]/;
const TEMP_PREFIX = '.tmp-';
const TEMP_NAME = /^\.tmp-([1-9][0-9]*)-[0-9a-f]+$/;

function percentEncode(char: string): string {
  return [...Buffer.from(char, 'utf8')]
    .map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`)
    .join('');
}

/** The directory name of a range; throws ERR_INVALID_CONFIG if it cannot be one. */
export function rangeDirName(rangeId: string): string {
  let name = '';
  for (const [i, char] of [...rangeId].entries()) {
    if (char === '/') name += '_';
    else if (char === ':') name += '-';
    else if (char === '.' && i === 0) name += '%2E';
    else if (KEPT.test(char)) name += char;
    else name += percentEncode(char);
  }
  if (name === '' || Buffer.byteLength(name) > NAME_MAX) {
    throw new InvalidConfigError(`IPAM range id ${JSON.stringify(rangeId)} cannot name a directory`);
  }
  return name;
}

/** The file name of a claim for a canonical address. */
export function addressFileName(ip: string): string {
  return ip.replaceAll(':', '_');
}

/** The canonical address a claim file stands for, or undefined when the name is not a claim. */
export function addressFromFileName(name: string): string | undefined {
  const text = name.replaceAll('_', ':');
  if (parseIp(text) === undefined) return undefined;
  const ip = canonicalIp(text);
  return ip === text ? ip : undefined;
}

/** A fresh temp file name owned by this process. */
export function tempFileName(): string {
  return `${TEMP_PREFIX}${process.pid}-${randomBytes(8).toString('hex')}`;
}

export function isTempFileName(name: string): boolean {
  return name.startsWith(TEMP_PREFIX);
}

/** The pid that wrote a temp file, or undefined when the name does not carry one. */
export function tempFileWriter(name: string): number | undefined {
  const match = TEMP_NAME.exec(name);
  return match?.[1] === undefined ? undefined : Number(match[1]);
}
