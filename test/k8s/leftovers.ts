/** What a Kubernetes bed could leave on the machine: checked before and after a cluster's run. */
import { readdirSync, readFileSync } from 'node:fs';
import { cgroupMounts } from '../../bed/k8s/cgroups.js';
import { KUBELET_SYSCTLS } from '../../bed/k8s/node-mounts.js';

export interface MachineState {
  netns: string[];
  cgroups: string[];
  mounts: string[];
  sysctls: string[];
}

export function machineState(): MachineState {
  const netns = (() => {
    try {
      return readdirSync('/run/netns').sort();
    } catch {
      return [];
    }
  })();
  const cgroups = cgroupMounts()
    .flatMap((m) => readdirSync(m).map((e) => `${m}/${e}`))
    .filter((p) => p.includes('/pwt-'))
    .sort();
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4] ?? '')
    .filter((p) => p !== '')
    .sort();
  const sysctls = KUBELET_SYSCTLS.map((s) => `${s}=${readFileSync(`/proc/sys/${s}`, 'utf8').trim()}`);
  return { netns, cgroups, mounts, sysctls };
}

/** Processes whose command line names `needle` (the cluster's directory, a node's cgroup). */
export function processesNaming(needles: string[]): string[] {
  const out: string[] = [];
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
      if (needles.some((n) => cmd.includes(n))) out.push(`${pid} ${cmd.slice(0, 200)}`);
    } catch {
      // gone
    }
  }
  return out;
}
