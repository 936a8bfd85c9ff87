/**
 * The JSON notation of OVSDB values (RFC 7047, section 5.1): `["uuid", U]`, `["named-uuid", N]`,
 * `["set", [...]]` (a one-element set may also be sent as the bare atom) and `["map", [[k, v], ...]]`.
 * Encoders build what podwire writes; decoders accept every form a server may answer with.
 */
import { DecodeError, type PodwireError } from '../../base/errors.js';

export type Atom = string | number | boolean | UuidAtom;
export type UuidAtom = ['uuid', string] | ['named-uuid', string];
export type OvsSet = ['set', Atom[]];
export type OvsMap = ['map', Array<[Atom, Atom]>];
export type OvsValue = Atom | OvsSet | OvsMap;

export function uuid(u: string): UuidAtom {
  return ['uuid', u];
}

/** Refers to a row inserted earlier in the same transaction under `uuid-name` N. */
export function namedUuid(n: string): UuidAtom {
  return ['named-uuid', n];
}

export function ovsSet(atoms: Atom[]): OvsSet {
  return ['set', atoms];
}

/** A string-to-string map, keys sorted so that equal maps encode equally. */
export function ovsMap(entries: Record<string, string>): OvsMap {
  return [
    'map',
    Object.keys(entries)
      .sort()
      .map((k): [Atom, Atom] => [k, entries[k] as string]),
  ];
}

function bad(what: string, value: unknown): PodwireError {
  return new DecodeError(`OVSDB: expected ${what}, got ${JSON.stringify(value)}`);
}

function isTagged(value: unknown, tag: string): value is [string, unknown] {
  return Array.isArray(value) && value.length === 2 && value[0] === tag;
}

/** The members of a set column, whichever form the server used. */
export function setMembers(value: unknown): unknown[] {
  if (isTagged(value, 'set')) {
    if (!Array.isArray(value[1])) throw bad('a set', value);
    return value[1];
  }
  return [value];
}

/** A UUID atom's text. */
export function uuidText(value: unknown): string {
  if (!isTagged(value, 'uuid') || typeof value[1] !== 'string') throw bad('a uuid', value);
  return value[1];
}

/** A string-to-string map column (external_ids, other_config, ...). */
export function mapEntries(value: unknown): Record<string, string> {
  if (!isTagged(value, 'map') || !Array.isArray(value[1])) throw bad('a map', value);
  const out: Record<string, string> = {};
  for (const pair of value[1] as unknown[]) {
    if (!Array.isArray(pair) || typeof pair[0] !== 'string' || typeof pair[1] !== 'string')
      throw bad('a string map entry', pair);
    out[pair[0]] = pair[1];
  }
  return out;
}

/** An optional integer column (`"min": 0, "max": 1`): undefined when the set is empty. */
export function optionalInteger(value: unknown): number | undefined {
  const members = setMembers(value);
  if (members.length === 0) return undefined;
  const n = members[0];
  if (members.length !== 1 || typeof n !== 'number' || !Number.isInteger(n)) throw bad('an integer', value);
  return n;
}

/** An optional string column: undefined when the set is empty. */
export function optionalString(value: unknown): string | undefined {
  const members = setMembers(value);
  if (members.length === 0) return undefined;
  const s = members[0];
  if (members.length !== 1 || typeof s !== 'string') throw bad('a string', value);
  return s;
}
