/**
 * Bounds-checked reading of OpenFlow structures: every read past the end of what a length field
 * allows is a DecodeError naming the structure, never a RangeError from Buffer or a silent zero.
 */
import { DecodeError } from '../../../base/errors.js';

export class CodecReader {
  readonly buf: Buffer;
  /** Offset of the next read. */
  at: number;
  readonly end: number;
  readonly what: string;

  constructor(buf: Uint8Array, what: string, start = 0, end = buf.length) {
    this.buf = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
    this.what = what;
    this.at = start;
    this.end = end;
    if (start < 0 || end > buf.length || start > end)
      this.fail(`bad range ${start}..${end} of ${buf.length}`);
  }

  get remaining(): number {
    return this.end - this.at;
  }

  fail(message: string): never {
    throw new DecodeError(`${this.what}: ${message}`);
  }

  need(n: number, field: string): void {
    if (n < 0 || this.at + n > this.end) {
      this.fail(`truncated at ${field}: needs ${n} bytes at offset ${this.at}, ${this.remaining} left`);
    }
  }

  u8(field: string): number {
    this.need(1, field);
    return this.buf.readUInt8(this.at++);
  }

  u16(field: string): number {
    this.need(2, field);
    const v = this.buf.readUInt16BE(this.at);
    this.at += 2;
    return v;
  }

  u32(field: string): number {
    this.need(4, field);
    const v = this.buf.readUInt32BE(this.at);
    this.at += 4;
    return v;
  }

  u64(field: string): bigint {
    this.need(8, field);
    const v = this.buf.readBigUInt64BE(this.at);
    this.at += 8;
    return v;
  }

  bytes(n: number, field: string): Buffer {
    this.need(n, field);
    const v = Buffer.from(this.buf.subarray(this.at, this.at + n));
    this.at += n;
    return v;
  }

  skip(n: number, field: string): void {
    this.need(n, field);
    this.at += n;
  }

  /** A reader over the next `n` bytes (a nested structure whose length the caller read). */
  sub(n: number, what: string): CodecReader {
    this.need(n, what);
    const r = new CodecReader(this.buf, `${this.what}: ${what}`, this.at, this.at + n);
    this.at += n;
    return r;
  }
}

/** Bytes to add to `n` to reach a multiple of 8 (OpenFlow pads matches, actions and instructions so). */
export function pad8(n: number): number {
  return (8 - (n % 8)) % 8;
}
