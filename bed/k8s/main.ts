/**
 * The Kubernetes bed by hand (README, "The Kubernetes bed"):
 *   node dist/bed/k8s/main.js up [--nodes N] [--dual-stack] [--no-podwire] [--ovs] [--etcd] [--extra-images A.tar,B.tar]
 *       brings a cluster up (with podwire installed from deploy/ unless --no-podwire; --etcd: with the
 *       etcd-tls example as its cluster store, not the Kubernetes API), prints the
 *       kubeconfig and how to run kubectl, writes the state file, and stays until SIGTERM/SIGINT or
 *       `down`, then removes everything;
 *   node dist/bed/k8s/main.js down       stops the running `up` (waits until it has cleaned up);
 *   node dist/bed/k8s/main.js kubectl ARGS...   kubectl in the underlay namespace, admin kubeconfig.
 * The state file: $PODWIRE_K8S_STATE, default /run/podwire-k8s-bed.json.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeCluster } from './kube-cluster.js';
import { installPodwire } from './podwire-install.js';

const STATE = process.env.PODWIRE_K8S_STATE ?? '/run/podwire-k8s-bed.json';

interface State {
  pid: number;
  kubeconfig: string;
  netns: string;
  kubectl: string;
  nodes: { name: string; ip: string; netns: string; holderPid: number }[];
  logs: { name: string; path: string }[];
}

async function up(args: string[]): Promise<void> {
  if (existsSync(STATE)) {
    const s = JSON.parse(readFileSync(STATE, 'utf8')) as State;
    try {
      process.kill(s.pid, 0);
      throw new Error(`a bed is already up (pid ${s.pid}, ${STATE}); run down first`);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
  }
  const nodesArg = args.indexOf('--nodes');
  const cluster = new KubeCluster({
    nodes: nodesArg >= 0 ? Number(args[nodesArg + 1]) : 2,
    dualStack: args.includes('--dual-stack'),
    ...(args.includes('--extra-images')
      ? { extraImages: (args[args.indexOf('--extra-images') + 1] ?? '').split(',').filter((f) => f !== '') }
      : {}),
  });
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    process.stderr.write('k8s-bed: tearing down\n');
    try {
      await cluster.cleanup();
    } finally {
      rmSync(STATE, { force: true });
      process.exit(0);
    }
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
  const t0 = Date.now();
  const writeState = () => {
    const state: State = {
      pid: process.pid,
      kubeconfig: cluster.adminKubeconfig,
      netns: cluster.underlay.ns,
      kubectl: `${cluster.bin}/kubectl`,
      nodes: cluster.nodes.map((n) => ({ name: n.name, ip: n.ip, netns: n.netns, holderPid: n.holderPid })),
      logs: cluster.logs(),
    };
    writeFileSync(STATE, `${JSON.stringify(state, null, 2)}\n`);
    return state;
  };
  try {
    await cluster.setup();
    // Written now already: kubectl and down work while podwire installs.
    writeState();
    if (!args.includes('--no-podwire')) {
      await installPodwire(cluster, {
        datapath: args.includes('--ovs') ? 'ovs-netdev' : 'linux-bridge',
        store: args.includes('--etcd') ? 'etcd' : 'kubernetes',
      });
    }
  } catch (err) {
    process.stderr.write(`k8s-bed: up failed: ${(err as Error).stack}\n`);
    for (const l of cluster.logs()) process.stderr.write(`k8s-bed: log ${l.name}: ${l.path}\n`);
    if (process.env.PODWIRE_K8S_KEEP_FAILED !== '1') {
      await stop();
      return;
    }
    process.stderr.write('k8s-bed: kept for inspection (PODWIRE_K8S_KEEP_FAILED=1); run down to remove it\n');
  }
  const state = writeState();
  process.stdout.write(
    `k8s-bed: up in ${((Date.now() - t0) / 1000).toFixed(1)} s; state ${STATE}\n` +
      `k8s-bed: kubectl: nsenter --net=/run/netns/${state.netns} ${state.kubectl} --kubeconfig ${state.kubeconfig} get nodes\n` +
      `k8s-bed: or: node dist/bed/k8s/main.js kubectl get nodes\n` +
      `k8s-bed: READY\n`,
  );
  setInterval(() => {}, 1 << 30);
}

async function down(): Promise<void> {
  if (!existsSync(STATE)) {
    process.stderr.write(`k8s-bed: no bed up (${STATE} missing)\n`);
    return;
  }
  const s = JSON.parse(readFileSync(STATE, 'utf8')) as State;
  try {
    process.kill(s.pid, 'SIGTERM');
  } catch {
    rmSync(STATE, { force: true });
    return;
  }
  for (;;) {
    try {
      process.kill(s.pid, 0);
    } catch {
      return;
    }
    await sleep(200);
  }
}

function kubectl(args: string[]): number {
  const s = JSON.parse(readFileSync(STATE, 'utf8')) as State;
  const r = spawnSync(
    'nsenter',
    [`--net=/run/netns/${s.netns}`, '--', s.kubectl, '--kubeconfig', s.kubeconfig, ...args],
    {
      stdio: 'inherit',
    },
  );
  return r.status ?? 1;
}

const [cmd, ...rest] = process.argv.slice(2);
if (cmd === 'up') await up(rest);
else if (cmd === 'down') await down();
else if (cmd === 'kubectl') process.exitCode = kubectl(rest);
else {
  process.stderr.write(
    'usage: main.js up [--nodes N] [--dual-stack] [--no-podwire] [--ovs] [--etcd] [--extra-images A.tar,B.tar] | down | kubectl ARGS...\n',
  );
  process.exitCode = 2;
}
