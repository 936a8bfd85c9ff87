/**
 * A real kube-apiserver (1.20, built by scripts/k8s-build.sh) over a real etcd (bed/etcd.ts), both
 * inside a network namespace (I7): by default a throwaway `pwt-*-kapi` namespace of its own, on its
 * loopback; or, for the multi-node bed, a namespace the caller owns, on an address of it. Its PKI is
 * made with openssl (bed/kube-pki.ts) in a directory removed with it; `kubectl` runs inside the
 * namespace with an admin kubeconfig (`system:masters`).
 *
 * Clients in the test process reach it through `connect` (the socket made inside the namespace,
 * I1), like the etcd's. `stop`/`restart` stop and start the API server alone (etcd keeps running,
 * with its data); `compact` compacts etcd to its current revision, which is what makes a watch from
 * an older resourceVersion answer 410 Gone. The API server's own compaction is off
 * (`--etcd-compaction-interval=0`) so that only the test compacts.
 *
 * `watchCache: false` runs it with `--watch-cache=false`: every watch goes to etcd, so compaction is
 * seen at once (with the watch cache on, a resourceVersion inside the cache's window is served from
 * the cache whatever etcd compacted; bookmarks come only from the watch cache).
 *
 * Nothing stays behind, pass or fail: `cleanup()` stops both, removes the directory and its own
 * namespace; an exit hook does the same for a failing test; the API server runs under `setpriv
 * --pdeathsig KILL`.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { stringify as stringifyYaml } from 'yaml';
import type { ConnectFn } from '../src/cluster/etcd-gateway.js';
import { KubeClient } from '../src/kube/kube-client.js';
import { kubeconfigConnection } from '../src/kube/kube-config.js';
import { EtcdServer } from './etcd.js';
import { must, type Run, run } from './exec.js';
import { CLIENT_EXT, issueKubeCert, type KubePki, makeKubePki } from './kube-pki.js';
import { uniqueName } from './namespaces.js';

/**
 * Where scripts/k8s-build.sh put the binaries (`scripts/k8s-build.sh --print-dir`); the script is
 * looked for upwards from here, so that a copy of the compiled tree (scripts/mutate.mjs's) finds it.
 */
export function kubeBinDir(): string {
  let dir = import.meta.dirname;
  for (;;) {
    const script = join(dir, 'scripts/k8s-build.sh');
    if (existsSync(script)) {
      const r = spawnSync(script, ['--print-dir'], { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`${script} --print-dir: ${(r.stderr ?? '').trim()}`);
      return r.stdout.trim();
    }
    const up = dirname(dir);
    if (up === dir) throw new Error(`scripts/k8s-build.sh not found above ${import.meta.dirname}`);
    dir = up;
  }
}

/** A file of deploy/, looked for upwards from here (as kubeBinDir looks for the build script). */
export function deployFile(name: string): string {
  let dir = import.meta.dirname;
  for (;;) {
    const path = join(dir, 'deploy', name);
    if (existsSync(path)) return path;
    const up = dirname(dir);
    if (up === dir) throw new Error(`deploy/${name} not found above ${import.meta.dirname}`);
    dir = up;
  }
}

export interface KubeApiOptions {
  /** Run inside this namespace (the caller owns it); default: a namespace of its own. */
  netns?: string;
  /** The address it listens on inside the namespace; default 127.0.0.1. */
  host?: string;
  port?: number;
  /** `--watch-cache`; default true (the API server's default). */
  watchCache?: boolean;
  /** How long `start`/`restart` wait for /readyz; default 60 s. */
  startTimeoutMs?: number;
}

const live = new Set<KubeApiServer>();
let exitHookInstalled = false;

export class KubeApiServer {
  readonly netns: string;
  readonly host: string;
  readonly port: number;
  /** `https://HOST:PORT`, valid inside `netns`. */
  readonly url: string;
  readonly dir: string;
  readonly pki: KubePki;
  readonly etcd: EtcdServer;
  /** The admin kubeconfig (client certificate in `system:masters`). */
  readonly kubeconfig: string;
  readonly #ownNetns: boolean;
  readonly #opts: KubeApiOptions;
  readonly #bin: string;
  #child: ChildProcess | undefined;
  #log: string[] = [];
  #cleaned = false;

  private constructor(o: {
    netns: string;
    ownNetns: boolean;
    dir: string;
    pki: KubePki;
    etcd: EtcdServer;
    opts: KubeApiOptions;
    bin: string;
  }) {
    this.netns = o.netns;
    this.#ownNetns = o.ownNetns;
    this.dir = o.dir;
    this.pki = o.pki;
    this.etcd = o.etcd;
    this.#opts = o.opts;
    this.#bin = o.bin;
    this.host = o.opts.host ?? '127.0.0.1';
    this.port = o.opts.port ?? 6443;
    this.url = `https://${this.host.includes(':') ? `[${this.host}]` : this.host}:${this.port}`;
    this.kubeconfig = join(o.dir, 'admin.kubeconfig');
  }

  static async start(opts: KubeApiOptions = {}): Promise<KubeApiServer> {
    if (!exitHookInstalled) {
      exitHookInstalled = true;
      process.on('exit', () => {
        for (const s of live) s.cleanupSync();
      });
    }
    const bin = kubeBinDir();
    const ownNetns = opts.netns === undefined;
    const netns = opts.netns ?? uniqueName('kapi');
    const host = opts.host ?? '127.0.0.1';
    let dir: string | undefined;
    let etcd: EtcdServer | undefined;
    try {
      if (ownNetns) {
        await must('ip', ['netns', 'add', netns]);
        await must('ip', ['-n', netns, 'link', 'set', 'lo', 'up']);
      }
      dir = await mkdtemp(join(tmpdir(), `podwire-kapi-${process.pid}-`));
      etcd = await EtcdServer.start({ netns, host: '127.0.0.1', clientPort: 12379, peerPort: 12380 });
      const pki = await makeKubePki(dir, [host, '127.0.0.1', '10.96.0.1']);
      const server = new KubeApiServer({ netns, ownNetns, dir, pki, etcd, opts, bin });
      live.add(server);
      await server.#writeKubeconfig(server.kubeconfig, pki.adminCert, pki.adminKey);
      try {
        await server.restart();
      } catch (err) {
        await server.cleanup();
        throw err;
      }
      return server;
    } catch (err) {
      if (dir !== undefined && !live.size) {
        await etcd?.cleanup();
        await rm(dir, { recursive: true, force: true });
        if (ownNetns) await run('ip', ['netns', 'del', netns]);
      }
      throw err;
    }
  }

  /** A socket factory for clients in the test process: the socket is made inside the namespace. */
  get connect(): ConnectFn {
    return this.etcd.connect;
  }

  get running(): boolean {
    return this.#child !== undefined;
  }

  /** Starts the API server (after `stop`) and waits until /readyz answers ok. */
  async restart(): Promise<void> {
    if (this.#child !== undefined) throw new Error('kube-apiserver is already running');
    const p = this.pki;
    // biome-ignore format: flag/value pairs
    const args = [
      'netns', 'exec', this.netns,
      'setpriv', '--pdeathsig', 'KILL', '--',
      join(this.#bin, 'kube-apiserver'),
      '--etcd-servers', this.etcd.endpoint,
      '--etcd-compaction-interval', '0',
      '--bind-address', this.host,
      '--advertise-address', this.host,
      '--secure-port', String(this.port),
      '--cert-dir', join(this.dir, 'certs'),
      '--tls-cert-file', p.serverCert,
      '--tls-private-key-file', p.serverKey,
      '--client-ca-file', p.ca,
      '--service-account-key-file', p.saPub,
      '--service-account-signing-key-file', p.saKey,
      '--service-account-issuer', 'https://kubernetes.default.svc',
      '--api-audiences', 'https://kubernetes.default.svc',
      '--service-cluster-ip-range', '10.96.0.0/24',
      '--authorization-mode', 'Node,RBAC',
      '--enable-admission-plugins', 'NodeRestriction',
      `--watch-cache=${this.#opts.watchCache ?? true}`,
      '--profiling=false',
      '--logtostderr',
      '-v', '1',
    ];
    const child = spawn('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    this.#child = child;
    child.stderr?.on('data', (d: Buffer) => {
      this.#log.push(
        ...d
          .toString()
          .split('\n')
          .filter((l) => l !== ''),
      );
      if (this.#log.length > 60) this.#log = this.#log.slice(-60);
    });
    child.on('exit', () => {
      if (this.#child === child) this.#child = undefined;
    });
    const timeout = this.#opts.startTimeoutMs ?? 60_000;
    const deadline = Date.now() + timeout;
    for (;;) {
      if (this.#child !== child) throw new Error(`kube-apiserver exited during start:\n${this.logTail()}`);
      const r = await this.kubectl(['get', '--raw', '/readyz'], { timeoutMs: 5000 });
      if (r.code === 0 && r.stdout.trim() === 'ok') return;
      if (Date.now() > deadline) {
        await this.stop();
        throw new Error(`kube-apiserver not ready after ${timeout} ms:\n${this.logTail()}`);
      }
      await sleep(200);
    }
  }

  /** SIGTERM, then SIGKILL after 5 s; resolves when the process is gone. etcd keeps running. */
  async stop(): Promise<void> {
    const child = this.#child;
    if (child === undefined) return;
    const gone = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once('exit', () => resolve());
    });
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await gone;
    clearTimeout(timer);
    if (this.#child === child) this.#child = undefined;
  }

  /** Runs kubectl (the same build) inside the namespace as the admin. */
  kubectl(args: string[], opts: { input?: string; timeoutMs?: number } = {}): Promise<Run> {
    // biome-ignore format: flag/value pairs
    return run('ip', [
      'netns', 'exec', this.netns, join(this.#bin, 'kubectl'), '--kubeconfig', this.kubeconfig, ...args,
    ], { timeoutMs: opts.timeoutMs ?? 30_000, ...(opts.input === undefined ? {} : { input: opts.input }) });
  }

  /** kubectl that must succeed; returns its stdout. */
  async kubectlOk(args: string[], input?: string): Promise<string> {
    const r = await this.kubectl(args, input === undefined ? {} : { input });
    if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')} exited ${r.code}: ${r.stderr.trim()}`);
    return r.stdout;
  }

  /** Applies objects given as JSON values (`kubectl apply -f -`). */
  async apply(...objects: object[]): Promise<void> {
    await this.kubectlOk(['apply', '-f', '-'], objects.map((o) => JSON.stringify(o)).join('\n'));
  }

  /**
   * Installs podwire's IPPool custom resource as users do (`kubectl apply -f deploy/crd-ippool.yaml`)
   * and waits until the API server serves it.
   */
  async installPoolCrd(): Promise<void> {
    const file = deployFile('crd-ippool.yaml');
    await this.kubectlOk(['apply', '-f', '-'], readFileSync(file, 'utf8'));
    await this.kubectlOk([
      'wait',
      '--for',
      'condition=established',
      '--timeout',
      '60s',
      'crd/ippools.podwire.io',
    ]);
  }

  /** etcd's current revision, and a compaction of everything before it. Equivalent to: `etcdctl compact REV`. */
  async compact(): Promise<number> {
    const r = (await this.etcd.call('/v3/kv/range', { key: Buffer.from('/').toString('base64') })) as {
      header?: { revision?: string };
    };
    const revision = Number(r.header?.revision);
    if (!Number.isInteger(revision) || revision < 1)
      throw new Error(`etcd: no revision in ${JSON.stringify(r)}`);
    await this.etcd.call('/v3/kv/compaction', { revision: String(revision), physical: true });
    return revision;
  }

  /** A client certificate of this API server's CA (e.g. `/CN=system:node:n1/O=system:nodes`). */
  async clientCert(name: string, subject: string): Promise<{ cert: string; key: string }> {
    return issueKubeCert(this.pki, name, subject, CLIENT_EXT);
  }

  /** Writes a kubeconfig for this server with the given client certificate; returns its path. */
  async writeKubeconfig(name: string, cert: { cert: string; key: string }): Promise<string> {
    const path = join(this.dir, `${name}.kubeconfig`);
    await this.#writeKubeconfig(path, cert.cert, cert.key);
    return path;
  }

  /**
   * A service account token (TokenRequest), bound to the API server's audience; the service account
   * is created first if missing.
   */
  async serviceAccountToken(namespace: string, name: string, seconds = 3600): Promise<string> {
    const get = await this.kubectl(['-n', namespace, 'get', 'serviceaccount', name]);
    if (get.code !== 0) await this.kubectlOk(['-n', namespace, 'create', 'serviceaccount', name]);
    const request = {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { expirationSeconds: seconds },
    };
    const path = join(this.dir, `token-request-${name}.json`);
    await writeFile(path, JSON.stringify(request));
    const out = await this.kubectlOk([
      'create',
      '--raw',
      `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`,
      '-f',
      path,
    ]);
    const token = (JSON.parse(out) as { status?: { token?: string } }).status?.token;
    if (typeof token !== 'string')
      throw new Error(`TokenRequest for ${namespace}/${name}: no token in ${out}`);
    return token;
  }

  logTail(): string {
    return this.#log.join('\n');
  }

  /** Stops the API server and etcd, removes the directory and (if its own) the namespace. Idempotent. */
  async cleanup(): Promise<void> {
    if (this.#cleaned) return;
    this.#cleaned = true;
    live.delete(this);
    try {
      await this.stop();
      await this.etcd.cleanup();
    } finally {
      await rm(this.dir, { recursive: true, force: true });
      if (this.#ownNetns) await run('ip', ['netns', 'del', this.netns]);
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.cleanup();
  }

  cleanupSync(): void {
    if (this.#cleaned) return;
    this.#cleaned = true;
    this.#child?.kill('SIGKILL');
    this.etcd.cleanupSync();
    rmSync(this.dir, { recursive: true, force: true });
    if (this.#ownNetns) spawnSync('ip', ['netns', 'del', this.netns]);
  }

  async #writeKubeconfig(path: string, cert: string, key: string): Promise<void> {
    const config = {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'pwt', cluster: { server: this.url, 'certificate-authority': this.pki.ca } }],
      users: [{ name: 'pwt', user: { 'client-certificate': cert, 'client-key': key } }],
      contexts: [{ name: 'pwt', context: { cluster: 'pwt', user: 'pwt' } }],
      'current-context': 'pwt',
    };
    await writeFile(path, stringifyYaml(config), { mode: 0o600 });
  }

  /**
   * Registers a Node as a kubelet would: the object with its pod CIDRs (the controller manager's
   * part), then its InternalIP in the status subresource (which kubectl 1.20 cannot write).
   */
  async registerNode(name: string, podCIDRs: string[], internalIP: string): Promise<void> {
    const spec = podCIDRs.length > 0 ? { podCIDR: podCIDRs[0], podCIDRs } : {};
    await this.apply({ apiVersion: 'v1', kind: 'Node', metadata: { name }, spec });
    await this.patchStatus(`/api/v1/nodes/${name}`, {
      addresses: [{ type: 'InternalIP', address: internalIP }],
    });
  }

  /**
   * Merge-patches the status subresource of the object at `path` (e.g. `/api/v1/namespaces/NS/pods/P`),
   * as a kubelet would write it; kubectl 1.20 cannot.
   */
  async patchStatus(path: string, status: object): Promise<void> {
    const client = new KubeClient(kubeconfigConnection(this.kubeconfig), { connect: this.connect });
    try {
      const r = await client.request('PATCH', `${path}/status`, {
        body: { status },
        contentType: 'application/merge-patch+json',
      });
      if (r.status !== 200) throw new Error(`PATCH ${path}/status: HTTP ${r.status}: ${r.body}`);
    } finally {
      client.close();
    }
  }

  /**
   * What an agent on store kubernetes reads beyond what the Node authorizer grants a node (the
   * Namespaces; decision 47): get, list and watch of Nodes, Pods and Namespaces, bound to `group`
   * (the bed's agents use node certificates, group `system:nodes`).
   */
  async grantAgentReads(group: string): Promise<void> {
    await this.apply(
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name: 'podwire-agent-reads' },
        rules: [
          { apiGroups: [''], resources: ['nodes', 'pods', 'namespaces'], verbs: ['get', 'list', 'watch'] },
          {
            apiGroups: ['networking.k8s.io'],
            resources: ['networkpolicies'],
            verbs: ['get', 'list', 'watch'],
          },
        ],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name: 'podwire-agent-reads' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'podwire-agent-reads' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: group }],
      },
    );
  }

  /** The CA certificate's text. */
  caText(): string {
    return readFileSync(this.pki.ca, 'utf8');
  }
}
