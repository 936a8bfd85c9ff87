/**
 * Throwaway network namespaces (I7). Every name starts with `pwt-` and the creating process's PID,
 * and every namespace a `NamespaceSet` made is deleted by `cleanup`, pass or fail.
 */
import { randomBytes } from 'node:crypto';
import { must, run } from './exec.js';

export const NETNS_DIR = '/run/netns';

export function uniqueName(role: string): string {
  return `pwt-${process.pid}-${randomBytes(3).toString('hex')}-${role}`;
}

export class NamespaceSet {
  readonly #names = new Set<string>();

  /** Equivalent to: `ip netns add NAME`. Returns the name. */
  async add(role: string): Promise<string> {
    const name = uniqueName(role);
    await must('ip', ['netns', 'add', name]);
    this.#names.add(name);
    return name;
  }

  /** Deletes one namespace now (e.g. to test DEL after the pod's netns is gone). */
  async delete(name: string): Promise<void> {
    await run('ip', ['netns', 'del', name]);
    this.#names.delete(name);
  }

  async cleanup(): Promise<void> {
    for (const name of this.#names) await run('ip', ['netns', 'del', name]);
    this.#names.clear();
  }
}

export function netnsPath(name: string): string {
  return `${NETNS_DIR}/${name}`;
}
