/**
 * A cgroup of the bed in every cgroup v1 hierarchy (and the v2 one of a hybrid machine): a node's
 * processes (containerd, its shims, the pods' containers, the kubelet, kube-proxy) all live below
 * it, so that teardown finds every one of them, kills them, and removes the whole tree bottom-up.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** Mount points of the cgroup file systems (v1 and v2), from /proc/self/mountinfo. */
export function cgroupMounts(): string[] {
  const out: string[] = [];
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const [left, right] = line.split(' - ');
    if (left === undefined || right === undefined) continue;
    const fstype = right.split(' ')[0];
    if (fstype === 'cgroup' || fstype === 'cgroup2') out.push(left.split(' ')[4] as string);
  }
  return out;
}

/** Every directory below `dir`, deepest first. */
function subtree(dir: string): string[] {
  const out: string[] = [];
  let entries: string[];
  try {
    entries = readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
  } catch {
    return out;
  }
  for (const e of entries) out.push(...subtree(join(dir, e)));
  out.push(dir);
  return out;
}

export class BedCgroup {
  /** The path below each hierarchy's root, e.g. `/pwt-123-ab12cd-node-0`. */
  readonly path: string;

  constructor(path: string) {
    this.path = path;
  }

  /** mkdir in every hierarchy; cpuset gets its parent's cpus and mems, or no task could join it. */
  create(sub = ''): void {
    for (const m of cgroupMounts()) {
      const dir = join(m, this.path, sub);
      mkdirSync(dir, { recursive: true });
      if (existsSync(join(dir, 'cpuset.cpus'))) {
        for (const d of [join(m, this.path), dir]) {
          for (const f of ['cpuset.cpus', 'cpuset.mems']) {
            if (readFileSync(join(d, f), 'utf8').trim() === '') {
              writeFileSync(join(d, f), readFileSync(join(d, '..', f), 'utf8'));
            }
          }
        }
      }
    }
  }

  /** Moves `pid` into `sub` of this cgroup in every hierarchy. */
  attach(pid: number, sub = ''): void {
    for (const m of cgroupMounts()) writeFileSync(join(m, this.path, sub, 'cgroup.procs'), `${pid}\n`);
  }

  /** Every PID in the tree, in any hierarchy. */
  pids(): number[] {
    const pids = new Set<number>();
    for (const m of cgroupMounts()) {
      for (const dir of subtree(join(m, this.path))) {
        try {
          for (const p of readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n')) {
            if (p !== '') pids.add(Number(p));
          }
        } catch {
          // gone meanwhile
        }
      }
    }
    return [...pids];
  }

  /** SIGKILLs every process of the tree until none is left (a fork racing the kill is caught next round). */
  async killAll(timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const pids = this.pids();
      if (pids.length === 0) return;
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      if (Date.now() > deadline) throw new Error(`cgroup ${this.path}: processes left: ${pids.join(' ')}`);
      await sleep(100);
    }
  }

  /** rmdir of the whole tree, deepest first, in every hierarchy. */
  async remove(): Promise<void> {
    for (const m of cgroupMounts()) {
      for (const dir of subtree(join(m, this.path))) {
        for (let i = 0; ; i++) {
          try {
            rmdirSync(dir);
            break;
          } catch (err) {
            if ((err as NodeJS.ErrnoException).code === 'ENOENT') break;
            // EBUSY while the kernel finishes with the last task: try again a few times.
            if (i >= 50) throw new Error(`rmdir ${dir}: ${(err as Error).message}`);
            await sleep(100);
          }
        }
      }
    }
  }

  /** Whether any hierarchy still has the tree. */
  exists(): boolean {
    return cgroupMounts().some((m) => existsSync(join(m, this.path)));
  }
}
