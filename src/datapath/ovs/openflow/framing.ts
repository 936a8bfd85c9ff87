/**
 * OpenFlow message framing on a byte stream: a socket may deliver part of a message or several in
 * one chunk; `push` returns every whole message so far, each a Buffer of its own (header included).
 * A header whose `length` is under 8 can never be resynchronised, so it is a DecodeError and the
 * caller drops the connection.
 */
import { DecodeError } from '../../../base/errors.js';
import { OFP_HEADER_LEN } from './header.js';

export class OfpFramer {
  /** Bytes of an incomplete message, kept until the rest arrives. */
  #rest: Buffer = Buffer.alloc(0);

  /** Appends `chunk` and returns the whole messages it completes, in order. */
  push(chunk: Buffer): Buffer[] {
    let buf = this.#rest.length === 0 ? chunk : Buffer.concat([this.#rest, chunk]);
    const out: Buffer[] = [];
    while (buf.length >= OFP_HEADER_LEN) {
      const length = buf.readUInt16BE(2);
      if (length < OFP_HEADER_LEN) {
        throw new DecodeError(`OpenFlow message with length ${length} (under the 8-byte header)`);
      }
      if (buf.length < length) break;
      // A copy, so a kept message never pins the whole chunk (and later chunks cannot alias it).
      out.push(Buffer.from(buf.subarray(0, length)));
      buf = buf.subarray(length);
    }
    this.#rest = buf.length === 0 ? Buffer.alloc(0) : Buffer.from(buf);
    return out;
  }

  /** Bytes held of a message not yet complete. */
  get pending(): number {
    return this.#rest.length;
  }
}
