/**
 * The cgroup parent a test gives podman (`--cgroup-parent`). With the cgroupfs manager podman creates
 * `PARENT/libpod-<id>` for each container and `PARENT/conmon` for the monitors in every hierarchy, and
 * removes only the container's own: the parent and `conmon` stay. A unique parent per test lets the
 * test find exactly what it caused, check that no process is left in it, and remove it.
 */
import { existsSync, readdirSync, readFileSync, rmdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const CGROUP_ROOT = '/sys/fs/cgroup';

export class CgroupParent {
  /** The name as podman takes it: an absolute cgroup path of one component. */
  readonly path: string;

  constructor(readonly name: string) {
    this.path = `/${name}`;
  }

  /** Every hierarchy's directory for this parent that exists now (v1 controllers, named, unified). */
  dirs(): string[] {
    if (!existsSync(CGROUP_ROOT)) return [];
    const out: string[] = [];
    const roots = existsSync(join(CGROUP_ROOT, 'cgroup.procs'))
      ? [CGROUP_ROOT] // a pure cgroup v2 mount
      : readdirSync(CGROUP_ROOT)
          .map((h) => join(CGROUP_ROOT, h))
          .filter((h) => existsSync(join(h, 'cgroup.procs')));
    for (const root of roots) {
      const dir = join(root, this.name);
      if (existsSync(dir)) out.push(dir);
    }
    return out;
  }

  /** PIDs in any cgroup under the parent, in any hierarchy (deduplicated). */
  pids(): number[] {
    const pids = new Set<number>();
    const walk = (dir: string): void => {
      for (const line of readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n')) {
        if (line !== '') pids.add(Number(line));
      }
      for (const e of readdirSync(dir)) {
        const sub = join(dir, e);
        if (statSync(sub).isDirectory()) walk(sub);
      }
    };
    for (const dir of this.dirs()) walk(dir);
    return [...pids];
  }

  /**
   * Removes the parent and its children, deepest first. A cgroup that still holds a process cannot be
   * removed (EBUSY): the error is returned as a message, so the caller reports it as a leftover.
   */
  remove(): string[] {
    const errors: string[] = [];
    const walk = (dir: string): void => {
      for (const e of readdirSync(dir)) {
        const sub = join(dir, e);
        if (statSync(sub).isDirectory()) walk(sub);
      }
      try {
        rmdirSync(dir);
      } catch (err) {
        errors.push(`${dir}: ${err instanceof Error ? err.message : String(err)}`);
      }
    };
    for (const dir of this.dirs()) walk(dir);
    return errors;
  }
}
