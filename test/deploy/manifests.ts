/** The YAML documents of deploy/, parsed, and lookups the manifest tests share. */
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';

export const DEPLOY_DIR = resolve(import.meta.dirname, '../../../deploy');

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [key: string]: unknown;
}

export interface Manifest {
  file: string;
  obj: K8sObject;
}

/** Every document of every deploy/*.yaml file; throws on a YAML error, naming the file. */
export function loadManifests(dir = DEPLOY_DIR): Manifest[] {
  const out: Manifest[] = [];
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith('.yaml') || f.endsWith('.yml'))
    .sort()) {
    for (const doc of parseAllDocuments(readFileSync(join(dir, file), 'utf8'))) {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors.map((e) => e.message).join('; ')}`);
      const obj = doc.toJS() as K8sObject | null;
      if (obj !== null) out.push({ file, obj });
    }
  }
  return out;
}

export function findOne<T = K8sObject>(manifests: Manifest[], kind: string): T {
  const hits = manifests.filter((m) => m.obj.kind === kind);
  if (hits.length !== 1) throw new Error(`expected one ${kind}, found ${hits.length}`);
  return (hits[0] as Manifest).obj as T;
}

// The parts of the pod spec the checks read (kubernetes-models types are wider than needed).

export interface VolumeMount {
  name: string;
  mountPath: string;
  readOnly?: boolean;
  mountPropagation?: string;
}

export interface Probe {
  httpGet?: { host?: string; port: number; path: string };
  exec?: { command: string[] };
}

export interface Container {
  name: string;
  image: string;
  command?: string[];
  env?: Array<{ name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }>;
  securityContext?: { privileged?: boolean; runAsUser?: number };
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  lifecycle?: { postStart?: { exec?: { command: string[] } } };
  volumeMounts?: VolumeMount[];
}

export interface Volume {
  name: string;
  hostPath?: { path: string; type?: string };
  configMap?: { name: string };
  emptyDir?: Record<string, unknown>;
}

export interface PodSpec {
  serviceAccountName?: string;
  hostNetwork?: boolean;
  hostPID?: boolean;
  tolerations?: Array<{ key?: string; operator?: string; effect?: string }>;
  initContainers?: Container[];
  containers: Container[];
  volumes?: Volume[];
}

export interface DaemonSetObject extends K8sObject {
  spec: {
    selector: { matchLabels: Record<string, string> };
    template: { metadata: { labels: Record<string, string> }; spec: PodSpec };
  };
}

export function container(list: Container[] | undefined, name: string): Container {
  const c = list?.find((x) => x.name === name);
  if (c === undefined) throw new Error(`no container ${name}`);
  return c;
}

export function volume(spec: PodSpec, name: string): Volume {
  const v = spec.volumes?.find((x) => x.name === name);
  if (v === undefined) throw new Error(`no volume ${name}`);
  return v;
}

/**
 * The mount of `c` under which `path` lies (the deepest one), with its volume: what the container
 * sees at `path` comes from there.
 */
export function mountFor(spec: PodSpec, c: Container, path: string): { mount: VolumeMount; volume: Volume } {
  const within = (c.volumeMounts ?? []).filter(
    (m) => path === m.mountPath || path.startsWith(`${m.mountPath.replace(/\/$/, '')}/`),
  );
  within.sort((a, b) => b.mountPath.length - a.mountPath.length);
  const mount = within[0];
  if (mount === undefined) throw new Error(`${c.name}: nothing mounted at ${path}`);
  return { mount, volume: volume(spec, mount.name) };
}
