/**
 * Where the API server is and how podwire proves who it is: in-cluster (the pod's service account)
 * or a kubeconfig file (a node agent outside a pod, the test bed).
 *
 * In-cluster, as every Kubernetes client does it: `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`,
 * the CA at `ca.crt` and the bearer token at `token` in the service account directory. The kubelet
 * rotates that token (a projected, expiring token), so the transport reads the file again whenever
 * it changes (kube-client.ts), never only once.
 *
 * A kubeconfig: its current context's cluster (`server`, `certificate-authority` or `-data`) and user
 * (`client-certificate`/`client-key` or their `-data`, or `token`, or `tokenFile`); relative paths
 * are relative to the file. Anything else a kubeconfig may hold (exec plugins, auth providers,
 * proxies, `insecure-skip-tls-verify`) is refused by name: podwire never talks to an API server it
 * has not verified, and runs no helper program to get credentials.
 */
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { InvalidConfigError } from '../base/errors.js';

export interface KubeConnection {
  /** `https://HOST:PORT`, with no path. */
  server: string;
  /** PEM of the CA the server's certificate must chain to. */
  ca: Buffer;
  /** Client certificate and key (PEM), or none. */
  cert?: Buffer;
  key?: Buffer;
  /** A fixed bearer token. */
  token?: string;
  /** A bearer token read from this file, read again whenever it changes. */
  tokenFile?: string;
  /** For logs: where this came from. */
  source: string;
}

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

function readOrRefuse(path: string, what: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new InvalidConfigError(`${what}: cannot read ${path}: ${(err as Error).message}`, { cause: err });
  }
}

function hostPort(host: string, port: string): string {
  return `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** The service account's connection, from the environment and the mounted service account files. */
export function inClusterConnection(
  env: NodeJS.ProcessEnv = process.env,
  dir: string = SERVICE_ACCOUNT_DIR,
): KubeConnection {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) {
    throw new InvalidConfigError(
      'cluster.store kubernetes: not in a pod (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT unset); set cluster.kubeconfig',
    );
  }
  if (!/^\d{1,5}$/.test(port)) throw new InvalidConfigError(`KUBERNETES_SERVICE_PORT: not a port: ${port}`);
  const tokenFile = join(dir, 'token');
  readOrRefuse(tokenFile, 'service account token');
  return {
    server: hostPort(host, port),
    ca: readOrRefuse(join(dir, 'ca.crt'), 'service account CA'),
    tokenFile,
    source: `in-cluster (${dir})`,
  };
}

type Named<T> = { name?: unknown } & { [k: string]: T | unknown };

function pick(list: unknown, name: unknown, what: string, file: string): Record<string, unknown> {
  if (!Array.isArray(list)) throw new InvalidConfigError(`kubeconfig ${file}: no ${what}s`);
  const entry = (list as Named<unknown>[]).find((e) => e?.name === name);
  const inner = entry?.[what];
  if (typeof inner !== 'object' || inner === null) {
    throw new InvalidConfigError(`kubeconfig ${file}: ${what} ${JSON.stringify(name)} not found`);
  }
  return inner as Record<string, unknown>;
}

const KNOWN_CLUSTER = new Set([
  'server',
  'certificate-authority',
  'certificate-authority-data',
  'extensions',
]);
const KNOWN_USER = new Set([
  'client-certificate',
  'client-certificate-data',
  'client-key',
  'client-key-data',
  'token',
  'tokenFile',
  'extensions',
]);

/** The connection a kubeconfig file's current context names. */
export function kubeconfigConnection(file: string): KubeConnection {
  const text = readOrRefuse(file, 'kubeconfig').toString('utf8');
  let doc: Record<string, unknown>;
  try {
    doc = parseYaml(text) as Record<string, unknown>;
  } catch (err) {
    throw new InvalidConfigError(`kubeconfig ${file}: not YAML: ${(err as Error).message}`, { cause: err });
  }
  if (typeof doc !== 'object' || doc === null)
    throw new InvalidConfigError(`kubeconfig ${file}: not a mapping`);
  const current = doc['current-context'];
  if (typeof current !== 'string' || current === '') {
    throw new InvalidConfigError(`kubeconfig ${file}: no current-context`);
  }
  const context = pick(doc.contexts, current, 'context', file);
  const cluster = pick(doc.clusters, context.cluster, 'cluster', file);
  const user = pick(doc.users, context.user, 'user', file);
  for (const k of Object.keys(cluster)) {
    if (!KNOWN_CLUSTER.has(k))
      throw new InvalidConfigError(`kubeconfig ${file}: cluster key ${k} is not supported`);
  }
  for (const k of Object.keys(user)) {
    if (!KNOWN_USER.has(k))
      throw new InvalidConfigError(`kubeconfig ${file}: user key ${k} is not supported`);
  }
  const base = dirname(file);
  const path = (p: unknown): string => (isAbsolute(String(p)) ? String(p) : join(base, String(p)));
  const material = (obj: Record<string, unknown>, key: string): Buffer | undefined => {
    const data = obj[`${key}-data`];
    if (typeof data === 'string') return Buffer.from(data, 'base64');
    const p = obj[key];
    return typeof p === 'string' ? readOrRefuse(path(p), `kubeconfig ${file}: ${key}`) : undefined;
  };
  const server = cluster.server;
  let url: URL;
  try {
    url = new URL(String(server));
  } catch {
    throw new InvalidConfigError(`kubeconfig ${file}: cluster server is not a URL: ${String(server)}`);
  }
  if (url.protocol !== 'https:' || (url.pathname !== '/' && url.pathname !== '')) {
    throw new InvalidConfigError(
      `kubeconfig ${file}: cluster server must be https://HOST[:PORT]: ${String(server)}`,
    );
  }
  const ca = material(cluster, 'certificate-authority');
  if (ca === undefined)
    throw new InvalidConfigError(`kubeconfig ${file}: cluster has no certificate-authority`);
  const conn: KubeConnection = { server: url.origin, ca, source: `kubeconfig ${file}` };
  const cert = material(user, 'client-certificate');
  const key = material(user, 'client-key');
  if ((cert === undefined) !== (key === undefined)) {
    throw new InvalidConfigError(`kubeconfig ${file}: client-certificate and client-key go together`);
  }
  if (cert !== undefined && key !== undefined) {
    conn.cert = cert;
    conn.key = key;
  }
  if (typeof user.token === 'string') conn.token = user.token;
  else if (typeof user.tokenFile === 'string') conn.tokenFile = path(user.tokenFile);
  if (conn.cert === undefined && conn.token === undefined && conn.tokenFile === undefined) {
    throw new InvalidConfigError(`kubeconfig ${file}: user has no client certificate and no token`);
  }
  return conn;
}
