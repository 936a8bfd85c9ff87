/**
 * podman, configured entirely inside one temp directory, running containers on a podwire network.
 *
 * Everything podman reads or writes is named here: containers.conf (CNI backend, plugin and network
 * config directories, file locks, file events), storage.conf (vfs), an empty registries.conf, the
 * graph root, run root and tmpdir. What no flag moves (runc's /run/runc, libcni's /var/lib/cni) lands
 * on tmpfs in a private mount namespace (mount-namespace.ts). Cgroups go under a parent unique to the
 * bed (cgroup-parent.ts). `cleanup()` removes all of it, pass or fail, and `leftovers()` says what is
 * still there afterwards. With `netns`, podman runs in a test's node namespace, and with it conmon
 * and the CNI plugins, so that chained plugins such as portmap change that namespace, not the machine.
 */
import { randomBytes } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Run, run } from '../../bed/exec.js';
import { makeBusyboxRootfs } from './busybox-rootfs.js';
import { CgroupParent } from './cgroup-parent.js';
import { PrivateMounts } from './mount-namespace.js';

export const NETWORK = 'podwire';
const COMMAND_TIMEOUT_MS = 60_000;

export interface PodmanBedOptions {
  /** The agent's CNI socket, written into the network configuration. */
  agentSocket: string;
  /** The relay binary, installed as the plugin `podwire`. */
  relay: string;
  /** A statically linked busybox for the containers' root. */
  busybox: string;
  /**
   * The network namespace (a name under /run/netns) podman runs in, and so conmon and the CNI plugins:
   * the node's, where chained plugins like portmap change iptables. Default: the caller's.
   */
  netns?: string;
  /** Plugins chained after podwire in the conflist (e.g. portmap), found in `pluginDirs`. */
  chained?: Array<Record<string, unknown> & { type: string }>;
  /** More plugin directories, searched after the one holding podwire (e.g. /usr/lib/cni). */
  pluginDirs?: string[];
}

/** What `podman run` adds for one container besides the bed's defaults. */
export interface RunOptions {
  /** `--publish` values, e.g. `30081:8080/tcp`. */
  publish?: string[];
  /** The container's command; default `sleep 3600`. */
  command?: string[];
}

/** What `podman container inspect` says about a container on the podwire network. */
export interface ContainerInfo {
  name: string;
  id: string;
  pid: number;
  conmonPid: number;
  /** The CNI_NETNS podman passed: the path of the netns it bind-mounted. */
  sandboxKey: string;
  ipv4: string;
  ipv4PrefixLen: number;
  gateway: string;
  ipv6: string;
  ipv6Gateway: string;
  mac: string;
}

interface InspectJson {
  Id: string;
  State: { Pid: number; ConmonPid: number };
  NetworkSettings: {
    SandboxKey: string;
    Networks?: Record<
      string,
      {
        IPAddress: string;
        IPPrefixLen: number;
        Gateway: string;
        GlobalIPv6Address: string;
        IPv6Gateway: string;
        MacAddress: string;
      }
    >;
  };
}

/** True while `pid` exists and has not exited (a zombie has exited; its reaping is its parent's job). */
export function isLive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // proc(5): the state follows the parenthesised command name, which may itself hold ") ".
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false; // no /proc entry: the process is gone
  }
}

/** Live processes whose command line mentions `text` (podman, conmon and its exit command all do). */
export function processesMentioning(text: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ');
    } catch {
      continue; // exited while listing
    }
    if (cmdline.includes(text) && isLive(Number(entry))) out.push(`${entry} ${cmdline.slice(0, 160)}`);
  }
  return out;
}

export class PodmanBed {
  readonly dir: string;
  readonly cgroup: CgroupParent;
  readonly rootfs: string;
  readonly #env: NodeJS.ProcessEnv;
  readonly #globalFlags: string[];
  #netns: string | undefined;
  #mounts: PrivateMounts | undefined;
  /** Every container this bed started, by name, as first inspected. */
  readonly containers = new Map<string, ContainerInfo>();

  private constructor(dir: string) {
    this.dir = dir;
    this.cgroup = new CgroupParent(`podwire-e2e-${process.pid}-${randomBytes(3).toString('hex')}`);
    this.rootfs = join(dir, 'rootfs');
    this.#env = {
      PATH: process.env.PATH ?? '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      HOME: dir,
      TMPDIR: join(dir, 'tmp'),
      CONTAINERS_CONF: join(dir, 'containers.conf'),
      CONTAINERS_STORAGE_CONF: join(dir, 'storage.conf'),
      CONTAINERS_REGISTRIES_CONF: join(dir, 'registries.conf'),
    };
    this.#globalFlags = [
      `--root=${join(dir, 'root')}`,
      `--runroot=${join(dir, 'runroot')}`,
      '--storage-driver=vfs',
      '--cgroup-manager=cgroupfs',
      '--events-backend=file',
      `--tmpdir=${join(dir, 'tmp')}`,
      '--runtime=runc',
    ];
  }

  /** Writes the configuration, installs the plugin and the network, builds the root, opens the namespace. */
  static async create(options: PodmanBedOptions): Promise<PodmanBed> {
    const bed = new PodmanBed(mkdtempSync(join(tmpdir(), 'pwt-podman-')));
    try {
      await bed.#prepare(options);
      return bed;
    } catch (err) {
      const problems = await bed.cleanup();
      if (problems.length > 0)
        throw new Error(`podman bed: setup failed and cleanup left: ${problems.join('; ')}`, { cause: err });
      throw err;
    }
  }

  async #prepare(options: PodmanBedOptions): Promise<void> {
    const d = this.dir;
    for (const sub of ['root', 'runroot', 'tmp', 'net.d', 'plugins']) mkdirSync(join(d, sub));
    writeFileSync(
      join(d, 'containers.conf'),
      [
        '[containers]',
        // The Debian default allows unprivileged ICMP sockets; the test asks for CAP_NET_RAW instead.
        'default_sysctls = []',
        '[network]',
        'network_backend = "cni"',
        `cni_plugin_dirs = ${JSON.stringify([join(d, 'plugins'), ...(options.pluginDirs ?? [])])}`,
        `network_config_dir = ${JSON.stringify(join(d, 'net.d'))}`,
        '[engine]',
        'cgroup_manager = "cgroupfs"',
        'events_logger = "file"',
        `events_logfile_path = ${JSON.stringify(join(d, 'tmp', 'events.log'))}`,
        `tmp_dir = ${JSON.stringify(join(d, 'tmp'))}`,
        // The default, shm, is one segment in /dev/shm shared by every podman on the machine.
        'lock_type = "file"',
        'runtime = "runc"',
        '',
      ].join('\n'),
    );
    writeFileSync(
      join(d, 'storage.conf'),
      [
        '[storage]',
        'driver = "vfs"',
        `graphroot = ${JSON.stringify(join(d, 'root'))}`,
        `runroot = ${JSON.stringify(join(d, 'runroot'))}`,
        '',
      ].join('\n'),
    );
    writeFileSync(join(d, 'registries.conf'), '# no registries: containers run from --rootfs\n');
    copyFileSync(options.relay, join(d, 'plugins', 'podwire'));
    writeFileSync(
      join(d, 'net.d', `${NETWORK}.conflist`),
      JSON.stringify({
        cniVersion: '1.0.0',
        name: NETWORK,
        plugins: [{ type: 'podwire', socket: options.agentSocket }, ...(options.chained ?? [])],
      }),
    );
    await makeBusyboxRootfs(this.rootfs, options.busybox);
    this.#netns = options.netns;
    this.#mounts = await PrivateMounts.open(d);
  }

  get mounts(): PrivateMounts {
    if (this.#mounts === undefined) throw new Error('podman bed: not set up');
    return this.#mounts;
  }

  /** `podman GLOBAL-FLAGS ARGS` inside the private mount namespace (and the bed's netns, if any). */
  podman(args: string[], timeoutMs = COMMAND_TIMEOUT_MS): Promise<Run> {
    const [cmd, ...rest] = this.mounts.command(['podman', ...this.#globalFlags, ...args], this.#netns);
    return run(cmd as string, rest, { env: this.#env, timeoutMs });
  }

  /** Like `podman`, but rejects with podman's stderr on a non-zero exit. */
  async mustPodman(args: string[]): Promise<string> {
    const r = await this.podman(args);
    if (r.code !== 0) throw new Error(`podman ${args.join(' ')} exited ${r.code}: ${r.stderr.trim()}`);
    return r.stdout;
  }

  /**
   * Starts a busybox container on the podwire network (`sleep` as PID 1 unless `options.command`
   * says otherwise, ports published as `options.publish` says) and inspects it.
   */
  async runContainer(name: string, options: RunOptions = {}): Promise<ContainerInfo> {
    await this.mustPodman([
      'run',
      '--detach',
      `--name=${name}`,
      '--ulimit=nofile=1024:1024',
      '--ulimit=nproc=1024:1024',
      `--cgroup-parent=${this.cgroup.path}`,
      // busybox ping opens a raw socket as root.
      '--cap-add=NET_RAW',
      `--network=${NETWORK}`,
      ...(options.publish ?? []).map((p) => `--publish=${p}`),
      // A boolean flag: the image argument is then the root directory.
      '--rootfs',
      this.rootfs,
      ...(options.command ?? ['/bin/sleep', '3600']),
    ]);
    const info = await this.inspect(name);
    this.containers.set(name, info);
    return info;
  }

  async inspect(name: string): Promise<ContainerInfo> {
    const [j] = JSON.parse(await this.mustPodman(['container', 'inspect', name])) as InspectJson[];
    if (j === undefined) throw new Error(`podman container inspect ${name}: empty answer`);
    const net = j.NetworkSettings.Networks?.[NETWORK];
    if (net === undefined) throw new Error(`container ${name} is not on the ${NETWORK} network`);
    return {
      name,
      id: j.Id,
      pid: j.State.Pid,
      conmonPid: j.State.ConmonPid,
      sandboxKey: j.NetworkSettings.SandboxKey,
      ipv4: net.IPAddress,
      ipv4PrefixLen: net.IPPrefixLen,
      gateway: net.Gateway,
      ipv6: net.GlobalIPv6Address,
      ipv6Gateway: net.IPv6Gateway,
      mac: net.MacAddress,
    };
  }

  /** `podman exec NAME ARGV...`. */
  exec(name: string, argv: string[]): Promise<Run> {
    return this.podman(['exec', name, ...argv]);
  }

  /** libcni's cached results for the podwire network, as seen inside the namespace. */
  cachedResults(): string[] {
    const dir = this.mounts.inside('/var/lib/cni/results');
    return existsSync(dir) ? readdirSync(dir) : [];
  }

  /** The container and conmon processes this bed started that are still alive. */
  liveContainerProcesses(): string[] {
    const out: string[] = [];
    for (const c of this.containers.values()) {
      if (isLive(c.pid)) out.push(`${c.name}: container process ${c.pid}`);
      if (isLive(c.conmonPid)) out.push(`${c.name}: conmon ${c.conmonPid}`);
    }
    return out;
  }

  /** Waits until no process of this bed is alive; returns what is still alive at the deadline. */
  async settle(timeoutMs = 15_000): Promise<string[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const live = [
        ...this.liveContainerProcesses(),
        ...processesMentioning(this.dir),
        ...this.cgroup
          .pids()
          .filter(isLive)
          .map((p) => `pid ${p} in cgroup ${this.cgroup.path}`),
      ];
      if (live.length === 0 || Date.now() > deadline) return live;
      await sleep(50);
    }
  }

  /**
   * Removes every container, waits for their processes, closes the namespace and removes the cgroups
   * and the directory. Returns the problems it met (empty when everything went as it should); a
   * process that had to be killed by hand is one.
   */
  async cleanup(): Promise<string[]> {
    const problems: string[] = [];
    if (this.#mounts?.open) {
      const rm = await this.podman(['rm', '--all', '--force', '--time=0']);
      if (rm.code !== 0) problems.push(`podman rm --all: exit ${rm.code}: ${rm.stderr.trim()}`);
      const stuck = await this.settle();
      if (stuck.length > 0) {
        problems.push(`still running after podman rm: ${stuck.join('; ')}`);
        // Only processes this bed started: its containers, their conmons, what sits in its cgroup.
        const pids = new Set([
          ...[...this.containers.values()].flatMap((c) => [c.pid, c.conmonPid]),
          ...this.cgroup.pids(),
          ...processesMentioning(this.dir).map((l) => Number(l.split(' ')[0])),
        ]);
        for (const pid of pids) if (isLive(pid)) process.kill(pid, 'SIGKILL');
        await this.settle(5_000);
      }
      await this.#mounts.close();
    }
    for (const c of this.containers.values()) {
      if (!existsSync(c.sandboxKey)) continue;
      problems.push(`netns ${c.sandboxKey} still exists`);
      const del = await run('ip', ['netns', 'del', basename(c.sandboxKey)]);
      if (del.code !== 0) problems.push(`ip netns del ${basename(c.sandboxKey)}: ${del.stderr.trim()}`);
    }
    problems.push(...this.cgroup.remove());
    rmSync(this.dir, { recursive: true, force: true });
    return problems;
  }

  /** What is left on the machine after `cleanup()`: nothing, when the bed and podman behaved. */
  leftovers(): string[] {
    const out: string[] = [];
    if (existsSync(this.dir)) out.push(`directory ${this.dir}`);
    if (this.#mounts && isLive(this.#mounts.pid)) out.push(`namespace holder ${this.#mounts.pid}`);
    out.push(...this.liveContainerProcesses());
    out.push(...processesMentioning(this.dir));
    out.push(...this.cgroup.dirs().map((d) => `cgroup ${d}`));
    for (const c of this.containers.values()) if (existsSync(c.sandboxKey)) out.push(`netns ${c.sandboxKey}`);
    return out;
  }
}
