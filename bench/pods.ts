/**
 * Pod namespaces for a batch, created fresh before it and deleted after it, always outside the
 * timed region. One `ip -batch` process creates or deletes a whole set (about 0.6 ms per namespace
 * where one `ip netns add` each costs about 2 ms).
 */

import { run } from '../bed/exec.js';
import { uniqueName } from '../bed/namespaces.js';
import type { Teardown } from './teardown.js';

export interface Pod {
  /** Namespace name under /run/netns. */
  ns: string;
  containerId: string;
}

/** Pods that exist until `delete` (or the teardown) removes them. */
export interface PodSet {
  pods: Pod[];
  delete(): Promise<void>;
}

/** Equivalent to: `ip netns add NAME` for each pod, in one `ip -batch -`. */
export async function createPods(teardown: Teardown, prefix: string, count: number): Promise<PodSet> {
  // The namespace's unique name doubles as the container ID: unique across batches and runs.
  const pods = Array.from({ length: count }, (_, i) => {
    const ns = uniqueName(`${prefix}-${i}`);
    return { ns, containerId: ns };
  });
  const names = pods.map((p) => p.ns);
  const undo = (): Promise<void> =>
    ipBatch(
      names.map((n) => `netns del ${n}`),
      true,
    );
  // Registered first: a batch that fails halfway has still created some of them.
  teardown.add(`pod namespaces ${prefix}*`, undo);
  await ipBatch(names.map((n) => `netns add ${n}`));
  return { pods, delete: () => teardown.release(undo) };
}

/**
 * A node namespace with lo up, deleted by the teardown. The deletion is registered before the
 * creation: a Ctrl-C that kills `ip netns add` halfway must not leave its mount behind.
 */
export async function createNodeNamespace(teardown: Teardown, role: string): Promise<string> {
  const name = uniqueName(role);
  teardown.add(`node namespace ${name}`, () => ipBatch([`netns del ${name}`], true));
  await ipBatch([`netns add ${name}`]);
  const up = await run('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
  if (up.code !== 0) throw new Error(`ip -n ${name} link set lo up exited ${up.code}: ${up.stderr.trim()}`);
  return name;
}

/**
 * Runs `ip -batch -` on `lines`. With `force`, ip continues after a failing line (deleting a
 * namespace that was never created) and the failures are not errors.
 */
async function ipBatch(lines: string[], force = false): Promise<void> {
  if (lines.length === 0) return;
  const r = await run('ip', force ? ['-force', '-batch', '-'] : ['-batch', '-'], {
    input: `${lines.join('\n')}\n`,
  });
  if (r.code !== 0 && !force) throw new Error(`ip -batch exited ${r.code}: ${r.stderr.trim()}`);
}
