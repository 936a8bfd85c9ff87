/**
 * Typed reads of decoded JSON. Every failure is an ERR_INVALID_CONFIG whose message starts with the
 * dotted path of the offending field (`prevResult.ips[1].address: ...`), which is what a runtime
 * operator needs to find it.
 *
 * Reads go through `own()`: a key inherited from Object.prototype (`constructor`, `toString`) must
 * never be mistaken for a configured one.
 */

import { InvalidConfigError, type PodwireError } from '../base/errors.js';

export type JsonObject = Record<string, unknown>;

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function own(obj: JsonObject, key: string): unknown {
  return Object.hasOwn(obj, key) ? obj[key] : undefined;
}

export function fieldPath(parent: string, key: string | number): string {
  if (typeof key === 'number') return `${parent}[${key}]`;
  return parent === '' ? key : `${parent}.${key}`;
}

export function invalid(path: string, reason: string): PodwireError {
  return new InvalidConfigError(`${path}: ${reason}`);
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}

/** `path` must hold an object; returns it. */
export function expectObject(value: unknown, path: string): JsonObject {
  if (!isJsonObject(value)) throw invalid(path, `must be an object, got ${typeName(value)}`);
  return value;
}

export function readString(obj: JsonObject, key: string, parent: string): string | undefined {
  const value = own(obj, key);
  if (value === undefined) return undefined;
  if (typeof value !== 'string')
    throw invalid(fieldPath(parent, key), `must be a string, got ${typeName(value)}`);
  return value;
}

export function requireString(obj: JsonObject, key: string, parent: string): string {
  const value = readString(obj, key, parent);
  if (value === undefined) throw invalid(fieldPath(parent, key), 'missing');
  return value;
}

export function readBoolean(obj: JsonObject, key: string, parent: string): boolean | undefined {
  const value = own(obj, key);
  if (value === undefined) return undefined;
  if (typeof value !== 'boolean')
    throw invalid(fieldPath(parent, key), `must be a boolean, got ${typeName(value)}`);
  return value;
}

export function readObject(obj: JsonObject, key: string, parent: string): JsonObject | undefined {
  const value = own(obj, key);
  return value === undefined ? undefined : expectObject(value, fieldPath(parent, key));
}

export function readArray(obj: JsonObject, key: string, parent: string): unknown[] | undefined {
  const value = own(obj, key);
  if (value === undefined) return undefined;
  if (!Array.isArray(value))
    throw invalid(fieldPath(parent, key), `must be an array, got ${typeName(value)}`);
  return value;
}

export function readStringArray(obj: JsonObject, key: string, parent: string): string[] | undefined {
  const list = readArray(obj, key, parent);
  if (list === undefined) return undefined;
  return list.map((item, i) => {
    if (typeof item !== 'string') {
      throw invalid(fieldPath(fieldPath(parent, key), i), `must be a string, got ${typeName(item)}`);
    }
    return item;
  });
}

/** A Go `uint`/`int` field in the spec: an integer in [0, 2^32). */
export function readUint32(obj: JsonObject, key: string, parent: string): number | undefined {
  const value = own(obj, key);
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 0xffff_ffff) {
    const got = typeof value === 'number' ? String(value) : typeName(value);
    throw invalid(fieldPath(parent, key), `must be an integer in [0, 4294967295], got ${got}`);
  }
  return value;
}
