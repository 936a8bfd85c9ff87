/**
 * A Kubernetes cluster on this machine (issue 26): an underlay (bed/underlay.ts), the control plane
 * in the underlay's namespace on its address (etcd over TLS from bed/etcd.ts, kube-apiserver,
 * kube-controller-manager, kube-scheduler), and N nodes (kube-node.ts: containerd, kubelet,
 * kube-proxy, each node in its own network and mount namespaces and cgroup tree). `cleanup` leaves
 * nothing behind, pass or fail: processes, mounts, cgroups, namespaces, files. `kubectl` runs the
 * cluster's kubectl in the underlay namespace with the admin kubeconfig.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { EtcdServer } from '../etcd.js';
import { must, type Run, run } from '../exec.js';
import { UNDERLAY_BRIDGE, Underlay } from '../underlay.js';
import { BedCgroup, cgroupMounts } from './cgroups.js';
import { Daemon } from './daemon.js';
import { KubeNode } from './kube-node.js';
import { writeKubeconfig } from './kubeconfig.js';
import { removeMadeTargets } from './node-mounts.js';
import { type KubePki, makeKubePki } from './pki.js';

export const POD_CIDR_V4 = '10.244.0.0/16';
export const POD_CIDR_V6 = 'fd00:10:244::/56';
export const SERVICE_CIDR_V4 = '10.96.0.0/16';
export const SERVICE_CIDR_V6 = 'fd00:10:96::/112';
/** Dual-stack: the underlay's IPv6 prefix (a /64 beside 172.30.0.0/24; the bed's own is ::fe). */
export const UNDERLAY_V6 = 'fd00:172:30::';
export const API_PORT = 6443;

export interface KubeClusterOptions {
  /** Nodes: default 2. */
  nodes?: number;
  /** IPv4 and IPv6 (the IPv6DualStack feature gate on every component). Default: IPv4 only. */
  dualStack?: boolean;
  /** The Kubernetes binaries (scripts/k8s-build.sh --print-dir). */
  bin?: string;
  /** The image archives' directory (scripts/k8s-images.sh). */
  images?: string;
  /** More archives of that directory to import on every node (the network e2e's nginx, debian-iptables). */
  extraImages?: string[];
  /** Progress lines (default: stderr). */
  say?: (line: string) => void;
}

/** Where scripts/k8s-build.sh puts the binaries, asked from the script. */
export async function kubeBinDir(): Promise<string> {
  const here = new URL('../../../scripts/k8s-build.sh', import.meta.url).pathname;
  return (await must(here, ['--print-dir'])).trim();
}

export const IMAGES_DIR = process.env.PODWIRE_IMAGES_CACHE ?? '/var/cache/podwire/images';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Kills and removes the cgroup trees of beds whose process died without cleaning up. */
async function sweepDead(): Promise<void> {
  const dead = new Set<string>();
  for (const m of cgroupMounts()) {
    for (const e of readdirSync(m)) {
      const pid = /^pwt-(\d+)-[0-9a-f]+-k8s/.exec(e)?.[1];
      if (pid !== undefined && !alive(Number(pid))) dead.add(e);
    }
  }
  for (const e of dead) {
    const cg = new BedCgroup(`/${e}`);
    await cg.killAll();
    await cg.remove();
  }
}

export class KubeCluster {
  readonly dir = mkdtempSync(join(tmpdir(), 'pwt-k8s-'));
  readonly underlay = new Underlay();
  readonly nodes: KubeNode[] = [];
  readonly daemons: Daemon[] = [];
  readonly adminKubeconfig = join(this.dir, 'admin.kubeconfig');
  readonly options: KubeClusterOptions;
  etcd: EtcdServer | undefined;
  pki: KubePki | undefined;
  bin = '';
  #say: (line: string) => void;

  constructor(options: KubeClusterOptions = {}) {
    this.options = options;
    this.#say = options.say ?? ((l) => process.stderr.write(`k8s-bed: ${l}\n`));
  }

  get apiServer(): string {
    return `https://${this.underlay.hostIp}:${API_PORT}`;
  }

  get featureGates(): string[] {
    return this.options.dualStack ? ['--feature-gates', 'IPv6DualStack=true'] : [];
  }

  get podCIDRs(): string {
    return this.options.dualStack ? `${POD_CIDR_V4},${POD_CIDR_V6}` : POD_CIDR_V4;
  }

  get serviceCIDRs(): string {
    return this.options.dualStack ? `${SERVICE_CIDR_V4},${SERVICE_CIDR_V6}` : SERVICE_CIDR_V4;
  }

  async setup(): Promise<this> {
    const t0 = Date.now();
    await sweepDead();
    this.bin = this.options.bin ?? (await kubeBinDir());
    await this.underlay.setup();
    if (this.options.dualStack) {
      // The nodes' second InternalIP (kube-node.ts), and the bed's own on the underlay bridge.
      await must('ip', [
        '-n',
        this.underlay.ns,
        'addr',
        'add',
        `${UNDERLAY_V6}fe/64`,
        'dev',
        UNDERLAY_BRIDGE,
        'nodad',
      ]);
    }
    const host = this.underlay.hostIp;
    this.etcd = await EtcdServer.start({ netns: this.underlay.ns, host, tls: true, startTimeoutMs: 60_000 });
    this.pki = await makeKubePki(this.dir, [host, '10.96.0.1']);
    writeKubeconfig(this.adminKubeconfig, this.apiServer, this.pki.ca.cert, this.pki.admin);
    this.#startControlPlane();
    await this.#waitFor(
      'kube-apiserver /readyz',
      async () => (await this.kubectl(['get', '--raw', '/readyz'])).code === 0,
    );
    this.#say(`control plane up after ${((Date.now() - t0) / 1000).toFixed(1)} s`);

    const dir = this.options.images ?? IMAGES_DIR;
    // PODWIRE_K8S_PODWIRE_TAR: podwire's image from another archive than the shared cache's (which
    // holds the image of whichever checkout ran scripts/k8s-images.sh last).
    const podwire = process.env.PODWIRE_K8S_PODWIRE_TAR ?? join(dir, 'podwire.tar');
    const images = [
      join(dir, 'pause.tar'),
      join(dir, 'agnhost.tar'),
      podwire,
      ...(this.options.extraImages ?? []).map((f) => join(dir, f)),
    ];
    for (let i = 0; i < (this.options.nodes ?? 2); i++) {
      this.nodes.push(
        new KubeNode({
          name: `node-${i}`,
          dir: this.dir,
          bin: this.bin,
          pki: this.pki,
          apiServer: this.apiServer,
          underlay: this.underlay,
          clusterCIDR: this.podCIDRs,
          images,
          featureGates: this.options.dualStack ? 'IPv6DualStack=true' : '',
          serviceCIDRs: [SERVICE_CIDR_V4],
          ...(this.options.dualStack ? { underlayV6: UNDERLAY_V6 } : {}),
        }),
      );
    }
    await Promise.all(this.nodes.map((n) => n.setup()));
    await this.#waitFor('every node registered with its podCIDRs', async () => {
      const r = await this.kubectl([
        'get',
        'nodes',
        '-o',
        'jsonpath={range .items[*]}{.spec.podCIDRs}{"\\n"}{end}',
      ]);
      const lines = r.stdout.split('\n').filter((l) => l !== '');
      return r.code === 0 && lines.length === this.nodes.length;
    });
    await this.#routePodCIDRs();
    await this.#waitFor(
      'the default ServiceAccount',
      async () => (await this.kubectl(['get', 'serviceaccount', 'default'])).code === 0,
    );
    this.#say(`cluster up after ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    this.#say(`kubeconfig: ${this.adminKubeconfig} (kubectl runs in netns ${this.underlay.ns})`);
    for (const l of this.logs()) this.#say(`log ${l.name}: ${l.path}`);
    return this;
  }

  /**
   * The control plane's namespace routes each Node's pod CIDRs to the Node's InternalIP, as a control
   * plane host that runs the CNI itself would reach pods: the API server's proxy to a pod or a Service
   * (`/api/v1/namespaces/NS/pods/NAME/proxy`, the upstream e2e's Proxy tests) connects to the pod's
   * address from here.
   */
  async #routePodCIDRs(): Promise<void> {
    const out = await this.kubectlOk(['get', 'nodes', '-o', 'json']);
    const nodes = (JSON.parse(out) as { items: KubeNodeObject[] }).items;
    for (const n of nodes) {
      for (const cidr of n.spec?.podCIDRs ?? []) {
        const ip = n.status?.addresses?.find(
          (a) => a.type === 'InternalIP' && a.address.includes(':') === cidr.includes(':'),
        )?.address;
        if (ip === undefined) continue;
        await must('ip', ['-n', this.underlay.ns, 'route', 'replace', cidr, 'via', ip]);
      }
    }
  }

  #startControlPlane(): void {
    const pki = this.pki as KubePki;
    const etcd = this.etcd as EtcdServer;
    const etcdPki = etcd.pki as NonNullable<EtcdServer['pki']>;
    const host = this.underlay.hostIp;
    // biome-ignore format: flag/value pairs
    this.#daemon('kube-apiserver', [
      '--etcd-servers', etcd.endpoint,
      '--etcd-cafile', etcdPki.ca,
      '--etcd-certfile', etcdPki.clientCert,
      '--etcd-keyfile', etcdPki.clientKey,
      '--bind-address', host,
      '--advertise-address', host,
      '--secure-port', String(API_PORT),
      '--insecure-port', '0',
      '--tls-cert-file', pki.apiserver.cert,
      '--tls-private-key-file', pki.apiserver.key,
      '--client-ca-file', pki.ca.cert,
      '--kubelet-client-certificate', pki.apiserverKubeletClient.cert,
      '--kubelet-client-key', pki.apiserverKubeletClient.key,
      '--kubelet-preferred-address-types', 'InternalIP',
      '--service-account-key-file', pki.saPub,
      '--service-account-signing-key-file', pki.saKey,
      '--service-account-issuer', 'https://kubernetes.default.svc.cluster.local',
      '--api-audiences', 'https://kubernetes.default.svc.cluster.local',
      '--service-cluster-ip-range', this.serviceCIDRs,
      '--authorization-mode', 'Node,RBAC',
      '--enable-admission-plugins', 'NodeRestriction',
      '--allow-privileged=true',
      '--profiling=false',
      '--event-ttl', '30m',
      ...this.featureGates,
    ]);
    const kcm = join(this.dir, 'controller-manager.kubeconfig');
    writeKubeconfig(kcm, this.apiServer, pki.ca.cert, pki.controllerManager);
    // biome-ignore format: flag/value pairs
    this.#daemon('kube-controller-manager', [
      '--kubeconfig', kcm,
      '--bind-address', '127.0.0.1',
      '--port', '0',
      '--leader-elect=false',
      '--use-service-account-credentials',
      '--service-account-private-key-file', pki.saKey,
      '--root-ca-file', pki.ca.cert,
      '--allocate-node-cidrs',
      '--cluster-cidr', this.podCIDRs,
      // The per-family sizes are refused without dual-stack.
      ...(this.options.dualStack ? ['--node-cidr-mask-size-ipv4', '24', '--node-cidr-mask-size-ipv6', '64'] : ['--node-cidr-mask-size', '24']),
      '--service-cluster-ip-range', this.serviceCIDRs,
      '--node-monitor-grace-period', '20s',
      ...this.featureGates,
    ]);
    const sched = join(this.dir, 'scheduler.kubeconfig');
    writeKubeconfig(sched, this.apiServer, pki.ca.cert, pki.scheduler);
    // biome-ignore format: flag/value pairs
    this.#daemon('kube-scheduler', [
      '--kubeconfig', sched,
      '--bind-address', '127.0.0.1',
      '--port', '0',
      '--leader-elect=false',
      ...this.featureGates,
    ]);
  }

  #daemon(name: string, args: string[]): void {
    const argv = ['nsenter', `--net=/run/netns/${this.underlay.ns}`, '--', join(this.bin, name), ...args];
    const d = new Daemon(name, argv, join(this.dir, `${name}.log`));
    d.start();
    this.daemons.push(d);
  }

  /** kubectl with the admin kubeconfig, in the underlay's namespace (where the API server listens). */
  kubectl(args: string[], opts: { input?: string; timeoutMs?: number } = {}): Promise<Run> {
    // biome-ignore format: one command
    return run('nsenter', [`--net=/run/netns/${this.underlay.ns}`, '--', join(this.bin, 'kubectl'), '--kubeconfig', this.adminKubeconfig, ...args], { timeoutMs: opts.timeoutMs ?? 120_000, ...(opts.input === undefined ? {} : { input: opts.input }) });
  }

  /** kubectl that must succeed: its stdout. */
  async kubectlOk(args: string[], opts: { input?: string; timeoutMs?: number } = {}): Promise<string> {
    const r = await this.kubectl(args, opts);
    if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')} exited ${r.code}: ${r.stderr.trim()}`);
    return r.stdout;
  }

  /** Every component's log. */
  logs(): { name: string; path: string }[] {
    return [
      ...this.daemons.map((d) => ({ name: d.name, path: d.log })),
      ...this.nodes.flatMap((n) => n.logs()),
    ];
  }

  async #waitFor(what: string, ok: () => Promise<boolean>, timeoutMs = 180_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await ok())) {
      const dead = [...this.daemons, ...this.nodes.flatMap((n) => n.daemons)].find((d) => !d.running);
      if (dead) throw new Error(`${dead.name} exited:\n${dead.tail()}`);
      if (Date.now() > deadline) throw new Error(`${what}: not after ${timeoutMs} ms`);
      await sleep(500);
    }
  }

  #cleaned = false;

  /** Idempotent. */
  async cleanup(): Promise<void> {
    if (this.#cleaned) return;
    this.#cleaned = true;
    const errors: unknown[] = [];
    const attempt = async (f: () => Promise<void>) => {
      try {
        await f();
      } catch (err) {
        errors.push(err);
      }
    };
    for (const n of this.nodes) await attempt(() => n.cleanup());
    for (const d of [...this.daemons].reverse()) await attempt(() => d.stop());
    await attempt(async () => this.etcd?.cleanup());
    await attempt(() => this.underlay.cleanup());
    removeMadeTargets(this.nodes.map((n) => n.cgroup.path));
    rmSync(this.dir, { recursive: true, force: true });
    if (errors.length > 0) throw new AggregateError(errors, 'k8s bed cleanup');
  }
}

/** The parts of a Node object the bed reads. */
interface KubeNodeObject {
  spec?: { podCIDRs?: string[] };
  status?: { addresses?: Array<{ type: string; address: string }> };
}
