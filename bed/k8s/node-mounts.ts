/**
 * A node's own mount namespace. Two nodes on one machine would share every hostPath the DaemonSet
 * mounts (/opt/cni/bin, /run/podwire, /var/lib/podwire, ...) and the agent's per-node lock would
 * refuse the second; so each node gets a mount namespace, as kind gives each node a container: a
 * holder process (`unshare --mount --propagation slave sleep infinity` in the node's network
 * namespace), and in it `/` made rshared (HostToContainer propagation into the agent's container
 * works; nothing flows back to the machine, the namespace being the machine's slave) and a per-node
 * directory bound over each of those paths. The node's containerd, kubelet and kube-proxy enter
 * both namespaces of the holder.
 *
 * Three kernel settings the kubelet sets at start (`vm.overcommit_memory`, `kernel.panic`,
 * `kernel.panic_on_oops`: machine-wide, not per namespace) get a plain file bound over them in the
 * node's namespace, so the kubelet writes there and the machine keeps its own values.
 */
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { must } from '../exec.js';
import { cgroupMounts } from './cgroups.js';

/** The machine paths each node has its own directory for. */
export const NODE_PATHS = [
  '/opt/cni/bin',
  '/etc/cni/net.d',
  '/run/podwire',
  '/var/lib/podwire',
  '/run/netns',
  '/run/openvswitch',
  '/var/lib/openvswitch',
  '/var/lib/kubelet',
  '/var/log/pods',
  '/var/log/containers',
  '/run/containerd',
  '/var/lib/containerd',
] as const;

/** Kernel settings the kubelet changes (kubelet's setupKernelTunables), kept off the machine. */
export const KUBELET_SYSCTLS = ['vm/overcommit_memory', 'kernel/panic', 'kernel/panic_on_oops'] as const;

export function nodePath(root: string, path: string): string {
  return join(root, path.slice(1).replaceAll('/', '_'));
}

/** Mount targets that did not exist on the machine and were made for the bed (removed at teardown). */
const made = new Set<string>();

/** Makes each node directory and any missing mount target; returns the shell script that binds them. */
export function prepareNodeMounts(root: string): string {
  const lines = ['set -e', 'mount --make-rshared /'];
  for (const p of NODE_PATHS) {
    const src = nodePath(root, p);
    mkdirSync(src, { recursive: true });
    if (!existsSync(p)) {
      // The topmost missing directory: the one to remove at teardown.
      let top: string = p;
      while (!existsSync(join(top, '..'))) top = join(top, '..');
      mkdirSync(p, { recursive: true });
      made.add(top);
    }
    lines.push(`mount --bind '${src}' '${p}'`);
  }
  for (const s of KUBELET_SYSCTLS) {
    const file = join(root, `sysctl_${s.replaceAll('/', '_')}`);
    writeFileSync(file, '0\n');
    lines.push(`mount --bind '${file}' '/proc/sys/${s}'`);
  }
  // The reference loopback plugin: containerd's CRI sets up every pod's lo with it.
  copyFileSync('/usr/lib/cni/loopback', join(nodePath(root, '/opt/cni/bin'), 'loopback'));
  return lines.join('\n');
}

/** Runs the bind script inside the holder's mount namespace. */
export async function bindNodeMounts(holderPid: number, script: string): Promise<void> {
  await must('nsenter', ['-t', String(holderPid), '-m', '--', 'sh', '-c', script]);
}

/**
 * Removes the mount targets the bed made on the machine, once no other bed's node is alive (a node
 * of another bed may be using them as mount points in its own namespace). Only empty directories.
 */
export function removeMadeTargets(ownCgroups: readonly string[]): void {
  const others = new Set<string>();
  for (const m of cgroupMounts()) {
    for (const e of readdirSync(m)) if (/^pwt-\d+-[0-9a-f]+-k8s/.test(e)) others.add(e);
  }
  for (const own of ownCgroups) others.delete(own.replace(/^\//, ''));
  if (others.size > 0) return;
  for (const dir of [...made].sort((a, b) => b.length - a.length)) {
    rmTree(dir);
    made.delete(dir);
  }
}

function rmTree(dir: string): void {
  try {
    for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) rmTree(join(dir, e.name));
    rmdirSync(dir);
  } catch {
    // not empty, or already gone: left as it is
  }
}
