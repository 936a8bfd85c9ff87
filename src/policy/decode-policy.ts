/**
 * A networking.k8s.io/v1 NetworkPolicy as the API server sends it (JSON, `unknown` here) to the
 * `NetworkPolicy` of model.ts, refusing what the API server's validation refuses, with an error that
 * names the object and the field (`NetworkPolicy ns/name: spec.ingress[0].from[1].ipBlock.cidr: ...`).
 * Nothing is half-decoded: the first fault throws.
 *
 * Defaults as the API server applies them: a port without `protocol` is TCP; missing or empty
 * `policyTypes` is `[Ingress]`, plus `Egress` when egress rules exist.
 *
 * CIDRs come out canonical. A `cidr` or `except` with host bits set ("192.168.1.5/24") is accepted,
 * as the API server has always accepted it (with a warning since KEP 4858), and means its network
 * ("192.168.1.0/24"): decision 44.
 */
import { InvalidConfigError } from '../base/errors.js';
import { type Prefix, parseAddressWithPrefix, prefixContains, prefixOf } from '../base/ip.js';
import type {
  IpBlock,
  LabelSelector,
  LabelSelectorRequirement,
  NetworkPolicy,
  PolicyPeer,
  PolicyPort,
  PolicyRule,
  Protocol,
} from './model.js';

const PROTOCOLS: readonly Protocol[] = ['TCP', 'UDP', 'SCTP'];
const OPERATORS: ReadonlyArray<LabelSelectorRequirement['operator']> = [
  'In',
  'NotIn',
  'Exists',
  'DoesNotExist',
];
/** A label name, or the name part of a key: 1-63 alphanumerics, '-', '_', '.', alphanumeric at both ends. */
const LABEL_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** IANA_SVC_NAME: 1-15 lower-case alphanumerics and '-', a letter somewhere, no '-' at an end or twice in a row. */
const SVC_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

type Json = Record<string, unknown>;

class Fault extends Error {}

function fail(field: string, message: string): never {
  throw new Fault(`${field}: ${message}`);
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** An optional object: missing or null gives `{}`. */
function object(v: unknown, field: string): Json {
  if (v === undefined || v === null) return {};
  if (!isObject(v)) fail(field, `must be an object, not ${JSON.stringify(v)}`);
  return v;
}

/** An optional list: missing or null gives `[]`. */
function list(v: unknown, field: string): unknown[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) fail(field, `must be a list, not ${JSON.stringify(v)}`);
  return v;
}

function string(v: unknown, field: string): string {
  if (typeof v !== 'string') fail(field, `must be a string, not ${JSON.stringify(v)}`);
  return v;
}

export function isLabelKey(key: string): boolean {
  const slash = key.indexOf('/');
  const name = slash < 0 ? key : key.slice(slash + 1);
  if (!LABEL_NAME.test(name)) return false;
  if (slash < 0) return true;
  const prefix = key.slice(0, slash);
  return prefix.length > 0 && prefix.length <= 253 && DNS_SUBDOMAIN.test(prefix);
}

export function isLabelValue(value: string): boolean {
  return value === '' || LABEL_NAME.test(value);
}

export function isServiceName(name: string): boolean {
  return name.length <= 15 && SVC_NAME.test(name) && /[a-z]/.test(name) && !name.includes('--');
}

function labelKey(v: unknown, field: string): string {
  const key = string(v, field);
  if (!isLabelKey(key)) fail(field, `${JSON.stringify(key)} is not a valid label key`);
  return key;
}

function labelValue(v: unknown, field: string): string {
  const value = string(v, field);
  if (!isLabelValue(value)) fail(field, `${JSON.stringify(value)} is not a valid label value`);
  return value;
}

export function decodeSelector(v: unknown, field: string): LabelSelector {
  const o = object(v, field);
  const matchLabels: Record<string, string> = {};
  for (const [k, value] of Object.entries(object(o.matchLabels, `${field}.matchLabels`))) {
    matchLabels[labelKey(k, `${field}.matchLabels`)] = labelValue(value, `${field}.matchLabels[${k}]`);
  }
  const matchExpressions = list(o.matchExpressions, `${field}.matchExpressions`).map((e, i) => {
    const f = `${field}.matchExpressions[${i}]`;
    const r = object(e, f);
    const key = labelKey(r.key, `${f}.key`);
    const operator = string(r.operator, `${f}.operator`);
    if (!(OPERATORS as readonly string[]).includes(operator)) {
      fail(`${f}.operator`, `${JSON.stringify(operator)} is not one of ${OPERATORS.join(', ')}`);
    }
    const values = list(r.values, `${f}.values`).map((x, j) => labelValue(x, `${f}.values[${j}]`));
    const op = operator as LabelSelectorRequirement['operator'];
    if ((op === 'In' || op === 'NotIn') && values.length === 0) {
      fail(`${f}.values`, `must be non-empty when operator is ${op}`);
    }
    if ((op === 'Exists' || op === 'DoesNotExist') && values.length > 0) {
      fail(`${f}.values`, `must be empty when operator is ${op}`);
    }
    return { key, operator: op, values };
  });
  return { matchLabels, matchExpressions };
}

/** A CIDR, host bits allowed and cleared (see the file comment). */
function cidr(v: unknown, field: string): Prefix {
  const text = string(v, field);
  const parsed = parseAddressWithPrefix(text);
  if (parsed === undefined) fail(field, `${JSON.stringify(text)} is not a valid CIDR`);
  return prefixOf(parsed, parsed.length);
}

function decodeIpBlock(v: unknown, field: string): IpBlock {
  const o = object(v, field);
  if (o.cidr === undefined || o.cidr === null || o.cidr === '') fail(`${field}.cidr`, 'required');
  const outer = cidr(o.cidr, `${field}.cidr`);
  const except = list(o.except, `${field}.except`).map((e, i) => {
    const f = `${field}.except[${i}]`;
    const inner = cidr(e, f);
    if (inner.family !== outer.family) {
      fail(f, `${inner.text} is not of the family of cidr ${outer.text}`);
    }
    if (!prefixContains(outer, inner) || inner.length === outer.length) {
      fail(f, `${inner.text} must be a strict subset of cidr ${outer.text}`);
    }
    return inner.text;
  });
  return { cidr: outer.text, except };
}

function decodePeer(v: unknown, field: string): PolicyPeer {
  const o = object(v, field);
  const hasPods = o.podSelector !== undefined && o.podSelector !== null;
  const hasNamespaces = o.namespaceSelector !== undefined && o.namespaceSelector !== null;
  const hasBlock = o.ipBlock !== undefined && o.ipBlock !== null;
  if (hasBlock && (hasPods || hasNamespaces)) {
    fail(field, 'may not specify ipBlock together with podSelector or namespaceSelector');
  }
  if (hasBlock) return { kind: 'ipBlock', ipBlock: decodeIpBlock(o.ipBlock, `${field}.ipBlock`) };
  if (!hasPods && !hasNamespaces)
    fail(field, 'must specify a peer (podSelector, namespaceSelector or ipBlock)');
  return {
    kind: 'pods',
    // A peer with only a namespaceSelector means every pod of those namespaces.
    podSelector: decodeSelector(o.podSelector, `${field}.podSelector`),
    namespaceSelector: hasNamespaces
      ? decodeSelector(o.namespaceSelector, `${field}.namespaceSelector`)
      : null,
  };
}

function decodePort(v: unknown, field: string): PolicyPort {
  const o = object(v, field);
  let protocol: Protocol = 'TCP';
  if (o.protocol !== undefined && o.protocol !== null) {
    const p = string(o.protocol, `${field}.protocol`);
    if (!(PROTOCOLS as readonly string[]).includes(p)) {
      fail(`${field}.protocol`, `${JSON.stringify(p)} is not one of ${PROTOCOLS.join(', ')}`);
    }
    protocol = p as Protocol;
  }
  const out: PolicyPort = { protocol };
  const port = o.port;
  if (port !== undefined && port !== null) {
    if (typeof port === 'number') {
      if (!Number.isInteger(port) || port < 1 || port > 65535) {
        fail(`${field}.port`, `${port} must be between 1 and 65535, inclusive`);
      }
      out.port = port;
    } else if (typeof port === 'string') {
      if (!isServiceName(port)) {
        fail(
          `${field}.port`,
          `${JSON.stringify(port)} is not a port number or a valid port name (IANA_SVC_NAME)`,
        );
      }
      out.port = port;
    } else {
      fail(`${field}.port`, `must be a number or a name, not ${JSON.stringify(port)}`);
    }
  }
  const endPort = o.endPort;
  if (endPort !== undefined && endPort !== null) {
    if (typeof out.port !== 'number') fail(`${field}.endPort`, 'may not be specified without a numeric port');
    if (typeof endPort !== 'number' || !Number.isInteger(endPort) || endPort > 65535) {
      fail(`${field}.endPort`, `${JSON.stringify(endPort)} must be an integer up to 65535`);
    }
    if (endPort < out.port)
      fail(`${field}.endPort`, `${endPort} must be equal to or greater than port ${out.port}`);
    out.endPort = endPort;
  }
  return out;
}

function decodeRule(v: unknown, field: string, peersKey: 'from' | 'to'): PolicyRule {
  const o = object(v, field);
  const peers = list(o[peersKey], `${field}.${peersKey}`).map((p, i) =>
    decodePeer(p, `${field}.${peersKey}[${i}]`),
  );
  const ports = list(o.ports, `${field}.ports`).map((p, i) => decodePort(p, `${field}.ports[${i}]`));
  return { peers: peers.length === 0 ? null : peers, ports: ports.length === 0 ? null : ports };
}

function decode(v: unknown): NetworkPolicy {
  if (!isObject(v)) fail('object', 'must be a JSON object');
  const metadata = object(v.metadata, 'metadata');
  const namespace = string(metadata.namespace, 'metadata.namespace');
  const name = string(metadata.name, 'metadata.name');
  if (namespace === '') fail('metadata.namespace', 'required');
  if (name === '') fail('metadata.name', 'required');
  try {
    const spec = object(v.spec, 'spec');
    const podSelector = decodeSelector(spec.podSelector, 'spec.podSelector');
    const ingress = list(spec.ingress, 'spec.ingress').map((r, i) =>
      decodeRule(r, `spec.ingress[${i}]`, 'from'),
    );
    const egress = list(spec.egress, 'spec.egress').map((r, i) => decodeRule(r, `spec.egress[${i}]`, 'to'));
    const types = list(spec.policyTypes, 'spec.policyTypes').map((t, i) => {
      const type = string(t, `spec.policyTypes[${i}]`);
      if (type !== 'Ingress' && type !== 'Egress') {
        fail(`spec.policyTypes[${i}]`, `${JSON.stringify(type)} is not Ingress or Egress`);
      }
      return type;
    });
    if (new Set(types).size !== types.length) fail('spec.policyTypes', 'duplicate values');
    const policyTypes: NetworkPolicy['policyTypes'] =
      types.length > 0 ? types : egress.length > 0 ? ['Ingress', 'Egress'] : ['Ingress'];
    return { namespace, name, podSelector, policyTypes, ingress, egress };
  } catch (err) {
    if (err instanceof Fault) throw new Fault(`NetworkPolicy ${namespace}/${name}: ${err.message}`);
    throw err;
  }
}

/**
 * Decodes and validates one NetworkPolicy object. Throws InvalidConfigError naming the object and
 * the field on anything the API server would refuse.
 */
export function decodeNetworkPolicy(v: unknown): NetworkPolicy {
  try {
    return decode(v);
  } catch (err) {
    if (!(err instanceof Fault)) throw err;
    const message = err.message.startsWith('NetworkPolicy ') ? err.message : `NetworkPolicy: ${err.message}`;
    throw new InvalidConfigError(message);
  }
}
