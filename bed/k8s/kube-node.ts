/**
 * A Kubernetes node of the bed: a network namespace on the underlay (no default route out), a mount
 * namespace of its own (node-mounts.ts), a cgroup tree (cgroups.ts) holding every process of the
 * node, and in them containerd, the three images imported (never pulled), a kubelet and kube-proxy.
 * `cleanup` kills the whole cgroup tree (pods' containers and shims included), which ends the mount
 * namespace and with it every mount the node made, then removes the cgroups, the namespace and the
 * node's directory.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { must, run } from '../exec.js';
import { uniqueName } from '../namespaces.js';
import type { Underlay, UnderlayNode } from '../underlay.js';
import { BedCgroup, cgroupMounts } from './cgroups.js';
import { containerdConfig, PAUSE_IMAGE } from './containerd-config.js';
import { Daemon } from './daemon.js';
import { writeKubeconfig } from './kubeconfig.js';
import { bindNodeMounts, prepareNodeMounts } from './node-mounts.js';
import { issueNodeCert, type KubePki } from './pki.js';

export interface KubeNodeOptions {
  name: string;
  dir: string;
  bin: string;
  pki: KubePki;
  apiServer: string;
  underlay: Underlay;
  clusterCIDR: string;
  /** Docker archives to import into the node's containerd. */
  images: string[];
  featureGates: string;
  /** The Service ranges: the node routes them to the underlay's host address (its default route, on a real node). */
  serviceCIDRs: string[];
  /**
   * Dual-stack: the IPv6 underlay prefix (`fd00:172:30::`); the node's uplink gets PREFIX + the
   * host part of its IPv4 address, and the kubelet reports both as InternalIPs (`--node-ip V4,V6`).
   */
  underlayV6?: string;
}

export class KubeNode {
  readonly name: string;
  readonly dir: string;
  readonly cgroup: BedCgroup;
  readonly daemons: Daemon[] = [];
  ul: UnderlayNode | undefined;
  #holder: Daemon | undefined;
  readonly #o: KubeNodeOptions;

  constructor(o: KubeNodeOptions) {
    this.#o = o;
    this.name = o.name;
    this.dir = join(o.dir, 'nodes', o.name);
    this.cgroup = new BedCgroup(`/${uniqueName(`k8s-${o.name}`)}`);
  }

  /** The node's IPv6 underlay address (dual-stack only). */
  ipv6: string | undefined;

  get ip(): string {
    return (this.ul as UnderlayNode).ip;
  }

  get netns(): string {
    return (this.ul as UnderlayNode).ns;
  }

  get holderPid(): number {
    return this.#holder?.pid as number;
  }

  /** argv that runs `cmd` in the node: its network, mount and UTS namespaces, its cgroup. */
  argv(cmd: string[]): string[] {
    const procs = cgroupMounts().map((m) => `'${m}${this.cgroup.path}/bed/cgroup.procs'`);
    const join = `for f in ${procs.join(' ')}; do echo $$ > "$f"; done`;
    // biome-ignore format: one command
    return ['nsenter', '-t', String(this.holderPid), '-n', '-m', '-u', '--', 'sh', '-c', `${join}; exec "$@"`, 'sh', ...cmd];
  }

  /** Runs a command in the node to completion. */
  exec(cmd: string[], timeoutMs = 120_000) {
    const [c, ...a] = this.argv(cmd);
    return run(c as string, a, { timeoutMs });
  }

  async setup(): Promise<void> {
    const o = this.#o;
    await mkdir(join(this.dir, 'log'), { recursive: true });
    this.ul = await o.underlay.addNode(`k8s${o.name.replace(/\D/g, '')}`);
    if (o.underlayV6 !== undefined) {
      this.ipv6 = `${o.underlayV6}${this.ul.ip.split('.').at(-1)}`;
      await must('ip', ['-n', this.netns, 'addr', 'add', `${this.ipv6}/64`, 'dev', 'eth0', 'nodad']);
    }
    // No default route out of the machine; a route for the Service range (a real node's default
    // route): a node's own connections to a ClusterIP need one before kube-proxy's DNAT rewrites them.
    for (const cidr of o.serviceCIDRs) {
      await must(
        'ip',
        [
          '-n',
          this.netns,
          'route',
          'add',
          cidr,
          'via',
          o.underlay.hostIp.includes(':') ? '' : o.underlay.hostIp,
          'dev',
          'eth0',
        ].filter((a) => a !== ''),
      );
    }
    this.cgroup.create('bed');
    // The holder: the node's mount and UTS namespaces live as long as it does. The UTS namespace
    // gives the node its own host name, its Node's name: what a hostNetwork pod on it sees (the e2e's
    // hostNetwork endpoints answer with it; on the machine's they all said the machine's name).
    const holder = new Daemon(
      `${o.name}/holder`,
      [
        'nsenter',
        `--net=/run/netns/${this.netns}`,
        '--',
        'unshare',
        '--mount',
        '--uts',
        '--propagation',
        'slave',
        '--',
        'sh',
        '-c',
        'hostname "$1" && exec sleep infinity',
        'sh',
        o.name,
      ],
      join(this.dir, 'log', 'holder.log'),
    );
    holder.start();
    this.#holder = holder;
    const pid = holder.pid as number;
    this.cgroup.attach(pid, 'bed');
    for (let i = 0; ; i++) {
      const comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
      if (comm === 'sleep') break;
      if (i > 200) throw new Error(`${o.name}: mount namespace holder did not start`);
      await sleep(20);
    }
    await bindNodeMounts(pid, prepareNodeMounts(join(this.dir, 'root')));

    writeFileSync(join(this.dir, 'containerd.toml'), containerdConfig());
    this.#daemon('containerd', ['containerd', '--config', join(this.dir, 'containerd.toml')]);
    await this.#waitFor('containerd', async () => (await this.exec(['ctr', 'version'], 5000)).code === 0);
    for (const image of o.images) {
      const r = await this.exec(['ctr', '-n', 'k8s.io', 'images', 'import', image], 300_000);
      if (r.code !== 0) throw new Error(`${o.name}: ctr images import ${image}: ${r.stderr}`);
    }

    const cert = await issueNodeCert(o.pki, o.name);
    const kubeconfig = join(this.dir, 'kubelet.kubeconfig');
    writeKubeconfig(kubeconfig, o.apiServer, o.pki.ca.cert, cert);
    // The pods' resolver: no DNS server in the bed; never the machine's resolver.
    const resolv = join(this.dir, 'resolv.conf');
    writeFileSync(resolv, `nameserver ${o.underlay.hostIp}\n`);
    // biome-ignore format: flag/value pairs
    this.#daemon('kubelet', [
      join(o.bin, 'kubelet'),
      '--kubeconfig', kubeconfig,
      '--hostname-override', o.name,
      '--node-ip', this.ipv6 === undefined ? this.ip : `${this.ip},${this.ipv6}`,
      '--container-runtime', 'remote',
      '--container-runtime-endpoint', 'unix:///run/containerd/containerd.sock',
      '--runtime-request-timeout', '5m',
      '--cgroup-driver', 'cgroupfs',
      '--cgroup-root', this.cgroup.path,
      '--fail-swap-on=false',
      '--root-dir', '/var/lib/kubelet',
      '--cert-dir', '/var/lib/kubelet/pki',
      '--volume-plugin-dir', '/var/lib/kubelet/volume-plugins',
      '--resolv-conf', resolv,
      '--pod-infra-container-image', PAUSE_IMAGE,
      '--client-ca-file', o.pki.ca.cert,
      '--anonymous-auth=false',
      '--authentication-token-webhook',
      '--authorization-mode', 'Webhook',
      '--read-only-port', '0',
      '--address', this.ip,
      '--healthz-bind-address', '127.0.0.1',
      // A shared machine: its disk fills with others' work; imported images must never be collected.
      '--eviction-hard', 'memory.available<50Mi,nodefs.available<1%,imagefs.available<1%',
      '--image-gc-high-threshold', '100',
      '--image-gc-low-threshold', '99',
      '--serialize-image-pulls=false',
      '--node-status-update-frequency', '4s',
      '--feature-gates', o.featureGates,
      '--v', '1',
    ]);
    const proxyConfig = join(this.dir, 'kube-proxy.kubeconfig');
    writeKubeconfig(proxyConfig, o.apiServer, o.pki.ca.cert, o.pki.kubeProxy);
    // biome-ignore format: flag/value pairs
    this.#daemon('kube-proxy', [
      join(o.bin, 'kube-proxy'),
      '--kubeconfig', proxyConfig,
      '--hostname-override', o.name,
      '--bind-address', this.ip,
      '--proxy-mode', 'iptables',
      '--cluster-cidr', o.clusterCIDR,
      // The machine-wide conntrack table size is the machine's (0: kube-proxy leaves it alone); the TCP
      // timeouts are the node namespace's own, set by kube-proxy to its defaults (the e2e checks
      // close-wait's hour).
      '--conntrack-max-per-core', '0',
      '--metrics-bind-address', '127.0.0.1:10249',
      '--healthz-bind-address', '127.0.0.1:10256',
      '--feature-gates', o.featureGates,
      '--v', '1',
    ]);
  }

  /** Restarts the kubelet (pods keep running: they are containerd's). */
  async restartKubelet(): Promise<void> {
    const k = this.daemons.find((d) => d.name.endsWith('/kubelet')) as Daemon;
    await k.stop();
    k.start();
  }

  #daemon(name: string, cmd: string[]): Daemon {
    const d = new Daemon(`${this.name}/${name}`, this.argv(cmd), join(this.dir, 'log', `${name}.log`));
    d.start();
    this.daemons.push(d);
    return d;
  }

  async #waitFor(what: string, ok: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await ok())) {
      const dead = this.daemons.find((d) => !d.running);
      if (dead) throw new Error(`${dead.name} exited:\n${dead.tail()}`);
      if (Date.now() > deadline) throw new Error(`${this.name}: ${what} not up after ${timeoutMs} ms`);
      await sleep(200);
    }
  }

  /** Every log of this node: name and path. */
  logs(): { name: string; path: string }[] {
    return this.daemons.map((d) => ({ name: d.name, path: d.log }));
  }

  async cleanup(): Promise<void> {
    // The kubelet first, so that it does not restart what is being killed.
    for (const d of [...this.daemons].reverse()) await d.stop(3000).catch(() => {});
    await this.cgroup.killAll();
    await this.#holder?.stop(1000);
    await this.cgroup.remove();
    if (this.ul) await this.#o.underlay.removeNode(this.ul);
    await rm(this.dir, { recursive: true, force: true });
  }
}
