/**
 * A private mount namespace for a container runtime under test, held open by one `sleep` process.
 *
 * Why: podman 4.3 writes two places no flag moves: runc's state root (`/run/runc`, runc's default,
 * podman passes no `--root`) and libcni's result cache (`/var/lib/cni`, podman sets no CacheDir).
 * Inside this namespace `/run`, `/var/lib`, `/etc/containers` and `/etc/cni` are fresh tmpfs mounts,
 * so nothing the runtime writes there reaches the machine, and the machine's own configuration is
 * not even visible to it.
 *
 * Invariant: `/run/netns` inside is a peer of the machine's `/run/netns` (same shared peer group), so
 * the network namespaces podman bind-mounts there propagate out, and an agent in another mount
 * namespace (`ip netns exec`, a slave of the machine's) can open the CNI_NETNS path podman passes.
 *
 * The namespace lives as long as any process in it: the holder, and every conmon and container that
 * podman started through `nsenter`. `close()` kills the holder; the tmpfs mounts go with the last one.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const NETNS_DIR = '/run/netns';

/**
 * Mount points replaced by an empty tmpfs inside the namespace, when they exist (creating one would
 * leave a directory on the machine: the file system is shared, only the mount tree is private).
 */
export const PRIVATE_TMPFS = ['/var/lib', '/etc/containers', '/etc/cni'] as const;

/**
 * The holder's script: keep the machine's /run/netns (bound aside, then moved back over the new /run),
 * mount the tmpfs, say "ready", become `sleep`. `$1` is an empty directory outside /run.
 */
const HOLDER_SCRIPT = `set -eu
mount --bind ${NETNS_DIR} "$1"
mount -t tmpfs -o mode=0755 podwire-e2e /run
mkdir ${NETNS_DIR}
mount --move "$1" ${NETNS_DIR}
for d in ${PRIVATE_TMPFS.join(' ')}; do
  if [ -d "$d" ]; then mount -t tmpfs -o mode=0755 podwire-e2e "$d"; fi
done
echo ready
exec sleep infinity
`;

/** True when the mount at `/run/netns` in this process's namespace is shared (ip netns makes it so). */
export function netnsDirIsShared(): boolean {
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const fields = line.split(' ');
    // mountinfo(5): field 5 is the mount point; optional fields from 7 up to "-" carry "shared:N".
    if (fields[4] !== NETNS_DIR) continue;
    const end = fields.indexOf('-');
    if (fields.slice(6, end).some((f) => f.startsWith('shared:'))) return true;
  }
  return false;
}

export class PrivateMounts {
  /** The holder (`unshare` exec'd into `sh`, then `sleep`: one PID); undefined once closed. */
  #holder: ChildProcess | undefined;
  readonly pid: number;

  private constructor(holder: ChildProcess, pid: number) {
    this.#holder = holder;
    this.pid = pid;
  }

  /** Creates the namespace; `workDir` must be outside /run (a directory is made in it). */
  static async open(workDir: string): Promise<PrivateMounts> {
    if (!netnsDirIsShared()) {
      throw new Error(`${NETNS_DIR} is not a shared mount: podman's namespaces would not reach the agent`);
    }
    const aside = join(workDir, 'netns-aside');
    mkdirSync(aside);
    const child = spawn(
      'unshare',
      ['--mount', '--propagation', 'unchanged', 'sh', '-c', HOLDER_SCRIPT, 'sh', aside],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.stderr?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    const deadline = Date.now() + 10_000;
    while (!out.includes('ready\n')) {
      if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`private mount namespace: holder failed: ${out.trim() || 'no output'}`);
      }
      await sleep(10);
    }
    if (child.pid === undefined) throw new Error('private mount namespace: holder has no PID');
    return new PrivateMounts(child, child.pid);
  }

  /** The namespace's file, for `nsenter --mount=`. */
  get nsPath(): string {
    return `/proc/${this.pid}/ns/mnt`;
  }

  /** A path as seen from inside the namespace (through the holder's root). */
  inside(path: string): string {
    return `/proc/${this.pid}/root${path}`;
  }

  /**
   * `argv` prefixed to run a command inside the namespace; with `netns` (a name under /run/netns),
   * inside that network namespace too (`nsenter --net`: unlike `ip netns exec`, no new mount namespace,
   * so what the command mounts under /run/netns still propagates out).
   */
  command(argv: string[], netns?: string): string[] {
    const net = netns === undefined ? [] : [`--net=${NETNS_DIR}/${netns}`];
    return ['nsenter', `--mount=${this.nsPath}`, ...net, '--', ...argv];
  }

  get open(): boolean {
    return this.#holder !== undefined;
  }

  /** Kills the holder and waits for it. Idempotent. */
  async close(): Promise<void> {
    const child = this.#holder;
    if (child === undefined) return;
    this.#holder = undefined;
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
  }
}
