/**
 * Splits a byte stream into JSON texts. OVSDB (RFC 7047, section 4) sends JSON-RPC messages back to
 * back with no delimiter, so a message ends where its outermost object closes. The scanner works on
 * bytes: every structural character ({ } [ ] " \) is ASCII, and no byte of a multi-byte UTF-8
 * sequence is below 0x80, so a sequence cut between two chunks is never misread.
 */
import { DecodeError } from '../../base/errors.js';

const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** One message must fit in this many bytes; a peer that sends more is broken or hostile. */
export const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

function isSpace(b: number): boolean {
  return b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d;
}

export class JsonStreamSplitter {
  /** Bytes of the message begun but not yet ended, in order; scanning state below covers all of them. */
  #chunks: Buffer[] = [];
  #length = 0;
  #depth = 0;
  #inString = false;
  #escaped = false;

  /** Feeds bytes; returns every message that ended inside them, decoded, in order. */
  push(chunk: Buffer): unknown[] {
    const out: unknown[] = [];
    let start = 0;
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i] as number;
      if (this.#inString) {
        if (this.#escaped) this.#escaped = false;
        else if (b === BACKSLASH) this.#escaped = true;
        else if (b === QUOTE) this.#inString = false;
        continue;
      }
      if (this.#depth === 0) {
        if (isSpace(b)) {
          start = i + 1;
          continue;
        }
        if (b !== OPEN_BRACE && b !== OPEN_BRACKET) {
          throw new DecodeError(`JSON stream: expected an object or array, got byte 0x${b.toString(16)}`);
        }
      }
      if (b === QUOTE) this.#inString = true;
      else if (b === OPEN_BRACE || b === OPEN_BRACKET) this.#depth++;
      else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) {
        this.#depth--;
        if (this.#depth === 0) {
          out.push(this.#finish(chunk.subarray(start, i + 1)));
          start = i + 1;
        }
      }
    }
    if (start < chunk.length) this.#keep(chunk.subarray(start));
    return out;
  }

  /** True when no message is partly received. */
  get idle(): boolean {
    return this.#length === 0;
  }

  #keep(part: Buffer): void {
    this.#length += part.length;
    if (this.#length > MAX_MESSAGE_BYTES) {
      throw new DecodeError(`JSON stream: message longer than ${MAX_MESSAGE_BYTES} bytes`);
    }
    // Copy: the caller may reuse its chunk.
    this.#chunks.push(Buffer.from(part));
  }

  #finish(last: Buffer): unknown {
    const bytes = this.#chunks.length === 0 ? last : Buffer.concat([...this.#chunks, last]);
    this.#chunks = [];
    this.#length = 0;
    try {
      return JSON.parse(bytes.toString('utf8'));
    } catch (err) {
      throw new DecodeError('JSON stream: a message is not valid JSON', { cause: err });
    }
  }
}
