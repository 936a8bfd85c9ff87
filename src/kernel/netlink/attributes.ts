/**
 * struct rtattr (== struct nlattr): a u16 length that counts the 4-byte header and the value, a u16
 * type whose two top bits are flags (NLA_F_NESTED, NLA_F_NET_BYTEORDER), the value, and zero padding
 * to the next 4-byte boundary. A nested attribute's value is itself a list of attributes.
 */
import { dataView, HOST_LITTLE_ENDIAN } from './codec.js';
import { NetlinkProtocolError } from './errors.js';
import { NLA_F_NESTED, NLA_HDRLEN, NLA_TYPE_MASK, NLMSG_ALIGN } from './uapi/netlink.js';

/** One attribute as it travels: `type` keeps the flag bits, `value` excludes header and padding. */
export interface RtAttr {
  type: number;
  value: Uint8Array;
}

const NLA_MAX_LEN = 0xffff;

/** The attribute type without its flag bits. */
export function attrType(attr: RtAttr): number {
  return attr.type & NLA_TYPE_MASK;
}

export function isNested(attr: RtAttr): boolean {
  return (attr.type & NLA_F_NESTED) !== 0;
}

/** The attributes back to back, each padded; written into one array (a join encodes thousands). */
export function encodeAttributes(attrs: readonly RtAttr[]): Uint8Array {
  let total = 0;
  for (const a of attrs) {
    const len = NLA_HDRLEN + a.value.length;
    if (len > NLA_MAX_LEN)
      throw new NetlinkProtocolError(`attribute ${attrType(a)} of ${len} bytes exceeds 65535`);
    total += NLMSG_ALIGN(len);
  }
  const out = new Uint8Array(total);
  const v = dataView(out);
  let off = 0;
  for (const a of attrs) {
    const len = NLA_HDRLEN + a.value.length;
    v.setUint16(off, len, HOST_LITTLE_ENDIAN);
    v.setUint16(off + 2, a.type, HOST_LITTLE_ENDIAN);
    out.set(a.value, off + NLA_HDRLEN);
    off += NLMSG_ALIGN(len);
  }
  return out;
}

/** Parses an attribute stream; values are views into `buf`. Throws on an attribute that overruns. */
export function decodeAttributes(buf: Uint8Array): RtAttr[] {
  const out: RtAttr[] = [];
  const v = dataView(buf);
  let off = 0;
  while (off < buf.length) {
    if (buf.length - off < NLA_HDRLEN) {
      throw new NetlinkProtocolError(`${buf.length - off} trailing bytes are too short for an rtattr`);
    }
    const len = v.getUint16(off, HOST_LITTLE_ENDIAN);
    const type = v.getUint16(off + 2, HOST_LITTLE_ENDIAN);
    if (len < NLA_HDRLEN || off + len > buf.length) {
      throw new NetlinkProtocolError(
        `rtattr type ${type & NLA_TYPE_MASK} of length ${len} overruns its parent`,
      );
    }
    out.push({ type, value: buf.subarray(off + NLA_HDRLEN, off + len) });
    off += NLMSG_ALIGN(len);
  }
  return out;
}

/** The first attribute of this type (flags ignored). */
export function findAttr(attrs: readonly RtAttr[], type: number): RtAttr | undefined {
  return attrs.find((a) => attrType(a) === type);
}

/** Converts one attribute value to and from its typed form. */
export interface AttrCodec<T> {
  encode(value: T): Uint8Array;
  decode(bytes: Uint8Array, type: number): T;
  /** Sets NLA_F_NESTED on encode (as iproute2 does); decoding accepts the flag either way. */
  readonly nested?: boolean;
}

function fixedWidth(width: number, bytes: Uint8Array, type: number): DataView {
  if (bytes.length !== width) {
    throw new NetlinkProtocolError(`attribute ${type} has ${bytes.length} bytes, expected ${width}`);
  }
  return dataView(bytes);
}

export const u8: AttrCodec<number> = {
  encode: (n) => Uint8Array.of(n),
  decode: (b, t) => fixedWidth(1, b, t).getUint8(0),
};

export const u16: AttrCodec<number> = {
  encode: (n) => {
    const out = new Uint8Array(2);
    dataView(out).setUint16(0, n, HOST_LITTLE_ENDIAN);
    return out;
  },
  decode: (b, t) => fixedWidth(2, b, t).getUint16(0, HOST_LITTLE_ENDIAN),
};

/** A __be16 (ports): network byte order whatever the host's, unlike every other netlink integer. */
export const be16: AttrCodec<number> = {
  encode: (n) => {
    const out = new Uint8Array(2);
    dataView(out).setUint16(0, n, false);
    return out;
  },
  decode: (b, t) => fixedWidth(2, b, t).getUint16(0, false),
};

export const u32: AttrCodec<number> = {
  encode: (n) => {
    const out = new Uint8Array(4);
    dataView(out).setUint32(0, n, HOST_LITTLE_ENDIAN);
    return out;
  },
  decode: (b, t) => fixedWidth(4, b, t).getUint32(0, HOST_LITTLE_ENDIAN),
};

export const i32: AttrCodec<number> = {
  encode: (n) => {
    const out = new Uint8Array(4);
    dataView(out).setInt32(0, n, HOST_LITTLE_ENDIAN);
    return out;
  },
  decode: (b, t) => fixedWidth(4, b, t).getInt32(0, HOST_LITTLE_ENDIAN),
};

/** NLA_STRING / NLA_NUL_STRING: sent NUL-terminated; read up to the first NUL. */
export const cstring: AttrCodec<string> = {
  encode: (s) => {
    const text = Buffer.from(s, 'utf8');
    const out = new Uint8Array(text.length + 1);
    out.set(text);
    return out;
  },
  decode: (b) => {
    const end = b.indexOf(0);
    return Buffer.from(b.buffer, b.byteOffset, end < 0 ? b.length : end).toString('utf8');
  },
};

/** A plain Uint8Array copy (a Buffer's own `slice` would return a view, not a copy). */
export function copyBytes(b: Uint8Array): Uint8Array {
  return new Uint8Array(b);
}

/** Opaque bytes (hardware addresses, IP addresses); decoding copies them out of the datagram. */
export const bytes: AttrCodec<Uint8Array> = {
  encode: (b) => b,
  decode: copyBytes,
};

/** A nest kept as raw attributes, for nests this layer does not interpret. */
export const attrList: AttrCodec<RtAttr[]> = {
  encode: (attrs) => encodeAttributes(attrs),
  decode: (b) => decodeAttributes(b).map((a) => ({ type: a.type, value: copyBytes(a.value) })),
  nested: true,
};

/**
 * Maps each field of an object type to its attribute type and codec. Encoding follows the schema's
 * key order; decoding ignores attributes the schema does not name, and keeps the first of duplicates.
 */
export type AttrSchema<T> = { [K in keyof T]-?: { type: number; codec: AttrCodec<NonNullable<T[K]>> } };

export function encodeWithSchema<T extends object>(schema: AttrSchema<T>, value: T): RtAttr[] {
  const out: RtAttr[] = [];
  for (const key of Object.keys(schema) as (keyof T)[]) {
    const v = value[key];
    if (v === undefined || v === null) continue;
    const field = schema[key];
    out.push({ type: field.type | (field.codec.nested ? NLA_F_NESTED : 0), value: field.codec.encode(v) });
  }
  return out;
}

export function decodeWithSchema<T extends object>(schema: AttrSchema<T>, attrs: readonly RtAttr[]): T {
  const byType = new Map<number, keyof T>();
  for (const key of Object.keys(schema) as (keyof T)[]) byType.set(schema[key].type, key);
  const out: Partial<Record<keyof T, unknown>> = {};
  for (const a of attrs) {
    const key = byType.get(attrType(a));
    if (key === undefined || out[key] !== undefined) continue;
    out[key] = schema[key].codec.decode(a.value, attrType(a));
  }
  return out as T;
}

/** A nest whose content is described by a schema. */
export function nestedSchema<T extends object>(schema: AttrSchema<T>): AttrCodec<T> {
  return {
    encode: (v) => encodeAttributes(encodeWithSchema(schema, v)),
    decode: (b) => decodeWithSchema(schema, decodeAttributes(b)),
    nested: true,
  };
}

/**
 * A struct of u32 fields in host byte order, in the order given (e.g. struct ifa_cacheinfo,
 * struct nda_cacheinfo); its length must be exactly 4 × the number of fields.
 */
export function u32Struct<K extends string>(fields: readonly K[]): AttrCodec<Record<K, number>> {
  const size = 4 * fields.length;
  return {
    encode: (c) => {
      const out = new Uint8Array(size);
      const v = dataView(out);
      fields.forEach((f, i) => {
        v.setUint32(4 * i, c[f], HOST_LITTLE_ENDIAN);
      });
      return out;
    },
    decode: (b, type) => {
      if (b.length !== size) {
        throw new NetlinkProtocolError(`attribute ${type} has ${b.length} bytes, expected ${size}`);
      }
      const v = dataView(b);
      const out = {} as Record<K, number>;
      fields.forEach((f, i) => {
        out[f] = v.getUint32(4 * i, HOST_LITTLE_ENDIAN);
      });
      return out;
    },
  };
}
