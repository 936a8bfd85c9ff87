/**
 * The last NetworkPolicy state this node enforced from a complete view of the API server, kept in
 * `<stateDir>/policy-snapshot.json` so that an agent restarted while the API server is away enforces
 * what it enforced before (issue 28: the last known policies stay in force), not nothing and not
 * "deny everything" for pods whose policies it knew. Written with a temporary file, fdatasync and
 * rename: a reader sees the old snapshot or the new, never a torn one.
 *
 * The policies, the namespaces and every pod are kept: a pod of this node is found again at start
 * by name and address (its labels and ports as last seen), one of another node is a peer.
 */
import { closeSync, fdatasyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { Namespace, NetworkPolicy, Pod } from '../../policy/model.js';

export interface PolicySnapshot {
  policies: NetworkPolicy[];
  namespaces: Namespace[];
  /** Every pod: this node's (labels and ports, found again by name and address) and the peers. */
  pods: Pod[];
}

interface SnapshotFile extends PolicySnapshot {
  version: 1;
  node: string;
  savedAt: string;
}

export function snapshotPath(stateDir: string): string {
  return join(stateDir, 'policy-snapshot.json');
}

/** The snapshot this node saved; undefined when there is none, or it is another node's or unreadable. */
export function loadSnapshot(
  stateDir: string,
  node: string,
): (PolicySnapshot & { savedAt: string }) | undefined {
  let f: SnapshotFile;
  try {
    f = JSON.parse(readFileSync(snapshotPath(stateDir), 'utf8')) as SnapshotFile;
  } catch {
    return undefined;
  }
  if (
    f?.version !== 1 ||
    f.node !== node ||
    !Array.isArray(f.policies) ||
    !Array.isArray(f.namespaces) ||
    !Array.isArray(f.pods)
  )
    return undefined;
  return { policies: f.policies, namespaces: f.namespaces, pods: f.pods, savedAt: f.savedAt };
}

export function saveSnapshot(stateDir: string, node: string, s: PolicySnapshot): void {
  const path = snapshotPath(stateDir);
  const file: SnapshotFile = {
    version: 1,
    node,
    savedAt: new Date().toISOString(),
    policies: s.policies,
    namespaces: s.namespaces,
    pods: s.pods,
  };
  const fd = openSync(`${path}.tmp`, 'w', 0o600);
  try {
    writeSync(fd, JSON.stringify(file));
    fdatasyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(`${path}.tmp`, path);
}

export function removeSnapshot(stateDir: string): void {
  rmSync(snapshotPath(stateDir), { force: true });
}
