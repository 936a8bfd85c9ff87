/**
 * Pod and Namespace objects of the API server as the policy model reads them (`policy/model.ts`):
 * only the fields the model has, validated as the API server validates them, so the compiler never
 * meets a malformed one. Each decoder throws an Error naming the field; the reflector then skips the
 * object, counts it and logs it once (kube/reflector.ts), and nothing else is touched.
 */
import { normalizeIp } from '../base/ip.js';
import type { ObjectMeta } from '../kube/reflector.js';
import type { ContainerPort, Namespace, Pod, Protocol } from '../policy/model.js';

/** A Pod as the cache keeps it: the model's Pod and the object's UID (a re-created pod has another). */
export interface CachedPod {
  pod: Pod;
  uid: string;
}

const PROTOCOLS: readonly Protocol[] = ['TCP', 'UDP', 'SCTP'];
/** IANA_SVC_NAME: at most 15 lower-case letters, digits and inner hyphens (no two in a row), one letter. */
const SVC_NAME = /^[a-z0-9]([a-z0-9]|-(?!-))*$/;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** metadata.labels: absent is none; otherwise a map of strings to strings. */
export function labelsOf(object: unknown, where: string): Record<string, string> {
  const labels = (object as { metadata?: { labels?: unknown } }).metadata?.labels;
  if (labels === undefined || labels === null) return {};
  if (!isObject(labels)) throw new Error(`${where}: metadata.labels is not a map`);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(labels)) {
    if (typeof v !== 'string') throw new Error(`${where}: metadata.labels.${k} is not a string`);
    out[k] = v;
  }
  return out;
}

function portOf(p: unknown, where: string): ContainerPort {
  if (!isObject(p)) throw new Error(`${where}: not an object`);
  const n = p.containerPort;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 65535)
    throw new Error(`${where}.containerPort: ${String(n)} is not a port number (1-65535)`);
  const protocol = p.protocol ?? 'TCP';
  if (!PROTOCOLS.includes(protocol as Protocol))
    throw new Error(`${where}.protocol: ${String(protocol)} is not TCP, UDP or SCTP`);
  const port: ContainerPort = { containerPort: n, protocol: protocol as Protocol };
  if (p.name !== undefined && p.name !== '') {
    const name = p.name;
    if (typeof name !== 'string' || name.length > 15 || !SVC_NAME.test(name) || !/[a-z]/.test(name))
      throw new Error(`${where}.name: ${JSON.stringify(name)} is not an IANA service name`);
    port.name = name;
  }
  return port;
}

/** `status.podIPs` (or the older `status.podIP`), canonical. */
function podIPsOf(status: Record<string, unknown>, where: string): string[] {
  const list = status.podIPs ?? (status.podIP === undefined ? [] : [{ ip: status.podIP }]);
  if (!Array.isArray(list)) throw new Error(`${where}: status.podIPs is not a list`);
  return list.map((entry, i) => {
    const text = isObject(entry) ? entry.ip : undefined;
    const ip = typeof text === 'string' ? normalizeIp(text) : undefined;
    if (ip === undefined) throw new Error(`${where}: status.podIPs[${i}].ip is not an IP address`);
    return ip;
  });
}

/** A Pod object as the model's Pod (and its UID); throws naming the field when it is malformed. */
export function podFromObject(object: unknown, meta: ObjectMeta): CachedPod {
  const where = `Pod ${meta.namespace ?? '?'}/${meta.name}`;
  if (meta.namespace === undefined) throw new Error(`${where}: metadata.namespace missing`);
  const o = object as { metadata?: { uid?: unknown }; spec?: unknown; status?: unknown };
  const uid = o.metadata?.uid;
  if (typeof uid !== 'string' || uid === '') throw new Error(`${where}: metadata.uid missing`);
  const labels = labelsOf(object, where);
  if (!isObject(o.spec)) throw new Error(`${where}: spec missing`);
  const spec = o.spec;
  if (!Array.isArray(spec.containers) || spec.containers.length === 0)
    throw new Error(`${where}: spec.containers is not a non-empty list`);
  const ports: ContainerPort[] = [];
  spec.containers.forEach((c: unknown, i: number) => {
    const cw = `${where}: spec.containers[${i}]`;
    if (!isObject(c)) throw new Error(`${cw}: not an object`);
    if (c.ports === undefined || c.ports === null) return;
    if (!Array.isArray(c.ports)) throw new Error(`${cw}.ports is not a list`);
    c.ports.forEach((p: unknown, j: number) => {
      ports.push(portOf(p, `${cw}.ports[${j}]`));
    });
  });
  if (spec.hostNetwork !== undefined && typeof spec.hostNetwork !== 'boolean')
    throw new Error(`${where}: spec.hostNetwork is not a boolean`);
  if (spec.nodeName !== undefined && typeof spec.nodeName !== 'string')
    throw new Error(`${where}: spec.nodeName is not a string`);
  const status = o.status === undefined || o.status === null ? {} : o.status;
  if (!isObject(status)) throw new Error(`${where}: status is not an object`);
  return {
    uid,
    pod: {
      namespace: meta.namespace,
      name: meta.name,
      labels,
      ips: podIPsOf(status, where),
      ports,
      hostNetwork: spec.hostNetwork === true,
      node: spec.nodeName ?? '',
    },
  };
}

/** A Namespace object as the model's Namespace; throws naming the field when it is malformed. */
export function namespaceFromObject(object: unknown, meta: ObjectMeta): Namespace {
  return { name: meta.name, labels: labelsOf(object, `Namespace ${meta.name}`) };
}
