/**
 * Unknown-field check for Kubernetes objects, from kubernetes-models' own declarations.
 *
 * Why: `validate()` checks types, enums and required fields, but Kubernetes' OpenAPI schemas allow
 * unknown keys (the API server drops them with a warning), so a misspelt `hostPid` passes validation
 * and is silently lost on apply. The package's `.d.ts` files mirror the schemas, one interface per
 * file with one `"key"?: Type;` line per property; this reads the property names from them and walks
 * the object, following each property's interface (or array of interfaces).
 *
 * Types that are not an interface (maps like `labels`, IntOrString, Quantity) are leaves: any key goes.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
/** kubernetes-models' root (its exports map does not expose package.json). */
const MODELS_ROOT = dirname(dirname(require.resolve('kubernetes-models/v1')));

interface Declared {
  /** Property name -> the `.d.ts` file of its interface type, or undefined for a leaf. */
  props: Map<string, string | undefined>;
}

const cache = new Map<string, Declared>();

/** Resolves an import specifier of `from` to a `.d.ts` file (relative, or in a node_modules above it). */
function resolveDts(from: string, spec: string): string | undefined {
  if (spec.startsWith('.')) {
    const file = join(dirname(from), `${spec}.d.ts`);
    return existsSync(file) ? file : undefined;
  }
  for (let dir = dirname(from); dir !== dirname(dir); dir = dirname(dir)) {
    const file = join(dir, 'node_modules', `${spec}.d.ts`);
    if (existsSync(file)) return file;
  }
  return undefined;
}

const IMPORT = /^import \{ (\w+) \} from "([^"]+)";$/;
const PROPERTY = /^ {4}"([^"]+)"\??: (.*)$/;
/** `IFoo;` or `Array<IFoo>;`: a property whose type is one imported interface. */
const REFERENCE = /^(?:Array<)?(\w+)>?;$/;

function declared(file: string): Declared {
  const hit = cache.get(file);
  if (hit) return hit;
  const lines = readFileSync(file, 'utf8').split('\n');
  const imports = new Map<string, string>();
  for (const line of lines) {
    const m = IMPORT.exec(line);
    if (m?.[1] && m[2]) imports.set(m[1], m[2]);
  }
  const start = lines.findIndex((l) => l.startsWith('export interface '));
  if (start < 0) throw new Error(`${file}: no interface declared`);
  const props = new Map<string, string | undefined>();
  for (let i = start + 1; i < lines.length && lines[i] !== '}'; i++) {
    const m = PROPERTY.exec(lines[i] as string);
    if (!m?.[1] || m[2] === undefined) continue;
    const ref = REFERENCE.exec(m[2])?.[1];
    const spec = ref === undefined ? undefined : imports.get(ref);
    const target = spec === undefined ? undefined : resolveDts(file, spec);
    // A type alias file (IntOrString, Quantity) declares no interface: treat it as a leaf.
    const isInterface = target !== undefined && /^export interface /m.test(readFileSync(target, 'utf8'));
    props.set(m[1], isInterface ? target : undefined);
  }
  const d = { props };
  cache.set(file, d);
  return d;
}

function walk(value: unknown, file: string, path: string, out: string[]): void {
  if (value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) walk(item, file, `${path}[${i}]`, out);
    return;
  }
  const { props } = declared(file);
  for (const [key, child] of Object.entries(value)) {
    if (!props.has(key)) {
      out.push(`${path}.${key}`);
      continue;
    }
    const childFile = props.get(key);
    if (childFile !== undefined) walk(child, childFile, `${path}.${key}`, out);
  }
}

/** The declaration file for an object's apiVersion and kind ("apps/v1" DaemonSet -> apps/v1/DaemonSet.d.ts). */
export function declarationFile(apiVersion: string, kind: string): string {
  const file = join(MODELS_ROOT, apiVersion, `${kind}.d.ts`);
  if (!existsSync(file)) throw new Error(`kubernetes-models declares no ${apiVersion} ${kind}`);
  return file;
}

/** Paths (like `.spec.template.spec.hostPid`) of keys the Kubernetes API does not define. */
export function unknownFields(obj: { apiVersion: string; kind: string }): string[] {
  const out: string[] = [];
  walk(obj, declarationFile(obj.apiVersion, obj.kind), '', out);
  return out;
}
