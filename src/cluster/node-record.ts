/**
 * Node records: validation into canonical form, equality, and the difference between two node sets.
 * Every record a store hands out went through `parseNodeRecord`, so consumers may trust its fields.
 */

import { isDnsSubdomain } from '../base/dns-label.js';
import type { PodwireError } from '../base/errors.js';
import { isPrefix, normalizeIp, parsePrefix } from '../base/ip.js';
import { type NodeEvent, type NodeRecord, type StoredNode, storeError } from './store.js';

const MAC = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/;
const KNOWN_KEYS = new Set(['name', 'underlayIP', 'podCIDRs', 'vtepMac', 'uplinkMac', 'labels']);

/** Why `name` is not a valid node name, or undefined when it is one. */
export function nodeNameProblem(name: unknown): string | undefined {
  if (typeof name !== 'string') return 'must be a string';
  if (name.length === 0 || name.length > 253) return 'must be 1 to 253 characters';
  if (!isDnsSubdomain(name)) return 'must be lower-case letters, digits, "-" and "." (a DNS-1123 subdomain)';
  return undefined;
}

/** Throws ERR_STORE naming `what` when `name` is not a valid node name. */
export function checkNodeName(name: unknown, what: string): string {
  const problem = nodeNameProblem(name);
  if (problem !== undefined) throw storeError(`${what}: node name ${JSON.stringify(name)} ${problem}`);
  return name as string;
}

export interface ParseRecordOptions {
  /** Refuse keys this version does not know (a configuration file: catch typos). Stored data: ignore them. */
  strictKeys: boolean;
}

/**
 * Validates a record and returns it in canonical form. `where` prefixes every error, e.g.
 * "cluster file /etc/podwire/cluster.yaml: nodes[2]" so that the message names the offending key.
 */
export function parseNodeRecord(value: unknown, where: string, opts: ParseRecordOptions): NodeRecord {
  const bad = (key: string, why: string): PodwireError => storeError(`${where}.${key}: ${why}`);
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw storeError(`${where}: must be a mapping`);
  }
  const obj = value as Record<string, unknown>;
  if (opts.strictKeys) {
    for (const key of Object.keys(obj)) if (!KNOWN_KEYS.has(key)) throw bad(key, 'unknown key');
  }
  const nameProblem = nodeNameProblem(obj.name);
  if (nameProblem !== undefined) throw bad('name', nameProblem);
  const name = obj.name as string;

  const underlayIP = typeof obj.underlayIP === 'string' ? normalizeIp(obj.underlayIP) : undefined;
  if (underlayIP === undefined) throw bad('underlayIP', 'must be an IPv4 or IPv6 address');

  if (!Array.isArray(obj.podCIDRs)) throw bad('podCIDRs', 'must be a list of CIDRs');
  const podCIDRs: string[] = [];
  const families = new Set<number>();
  for (const [i, text] of (obj.podCIDRs as unknown[]).entries()) {
    const prefix = parsePrefix(text as string);
    if (!isPrefix(prefix)) throw bad(`podCIDRs[${i}]`, `${JSON.stringify(text)}: ${prefix.error}`);
    if (families.has(prefix.family)) throw bad(`podCIDRs[${i}]`, `a second IPv${prefix.family} CIDR`);
    families.add(prefix.family);
    podCIDRs.push(prefix.text);
  }

  const record: NodeRecord = { name, underlayIP, podCIDRs };
  if (obj.vtepMac !== undefined) {
    const mac = typeof obj.vtepMac === 'string' ? obj.vtepMac.toLowerCase() : '';
    if (!MAC.test(mac)) throw bad('vtepMac', 'must be a MAC address like 0a:58:0a:f4:01:01');
    record.vtepMac = mac;
  }
  if (obj.uplinkMac !== undefined) {
    const mac = typeof obj.uplinkMac === 'string' ? obj.uplinkMac.toLowerCase() : '';
    if (!MAC.test(mac)) throw bad('uplinkMac', 'must be a MAC address like 52:54:00:12:34:56');
    record.uplinkMac = mac;
  }
  if (obj.labels !== undefined) {
    const labels = obj.labels;
    if (labels === null || typeof labels !== 'object' || Array.isArray(labels)) {
      throw bad('labels', 'must be a mapping of strings');
    }
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(labels)) {
      if (typeof v !== 'string') throw bad(`labels.${k}`, 'must be a string');
      out[k] = v;
    }
    record.labels = out;
  }
  return record;
}

function sameLabels(a: Record<string, string> | undefined, b: Record<string, string> | undefined): boolean {
  const ak = Object.keys(a ?? {});
  if (ak.length !== Object.keys(b ?? {}).length) return false;
  return ak.every((k) => a?.[k] === b?.[k]);
}

/** Field-by-field equality of two canonical records (the order of podCIDRs matters). */
export function nodesEqual(a: NodeRecord, b: NodeRecord): boolean {
  return (
    a.name === b.name &&
    a.underlayIP === b.underlayIP &&
    a.vtepMac === b.vtepMac &&
    a.uplinkMac === b.uplinkMac &&
    a.podCIDRs.length === b.podCIDRs.length &&
    a.podCIDRs.every((c, i) => c === b.podCIDRs[i]) &&
    sameLabels(a.labels, b.labels)
  );
}

/**
 * The events that turn `known` into `next`: a put for every node that is new or whose version
 * changed, a delete for every node that is gone. `known` is updated in place to `next`.
 */
export function diffNodes(known: Map<string, StoredNode>, next: StoredNode[], revision: string): NodeEvent[] {
  const events: NodeEvent[] = [];
  const seen = new Set<string>();
  for (const s of next) {
    seen.add(s.node.name);
    const before = known.get(s.node.name);
    if (before === undefined || before.version !== s.version || !nodesEqual(before.node, s.node)) {
      events.push({ type: 'put', node: s.node, version: s.version, revision });
      known.set(s.node.name, s);
    }
  }
  for (const [name, s] of known) {
    if (seen.has(name)) continue;
    events.push({ type: 'delete', node: s.node, revision });
    known.delete(name);
  }
  return events;
}

export function byName(a: StoredNode, b: StoredNode): number {
  return a.node.name < b.node.name ? -1 : a.node.name > b.node.name ? 1 : 0;
}
