/**
 * What the Kubernetes tests run on the bed's cluster, through kubectl only: agnhost Deployments and
 * pods, their addresses and nodes, commands inside them; and a plain host on the underlay (a
 * namespace of the bed running agnhost's netexec), the "outside" of the cluster.
 */
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { stringify } from 'yaml';
import { type Run, run } from '../exec.js';
import type { UnderlayNode } from '../underlay.js';
import { Daemon } from './daemon.js';
import type { KubeCluster } from './kube-cluster.js';

export const AGNHOST = 'k8s.gcr.io/e2e-test-images/agnhost:2.21';

export interface PodInfo {
  name: string;
  ip: string;
  ips: string[];
  node: string;
  uid: string;
}

/** Applies objects given as JS values (one YAML stream). */
export async function apply(cluster: KubeCluster, objects: unknown[]): Promise<void> {
  await cluster.kubectlOk(['apply', '-f', '-'], { input: objects.map((o) => stringify(o)).join('---\n') });
}

/** A Deployment of agnhost netexec (HTTP 8080, UDP 8081), spread over the nodes. */
export function netexecDeployment(
  name: string,
  replicas: number,
  extra: { annotations?: Record<string, string>; hostPort?: number } = {},
): unknown {
  const labels = { app: name };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: 'default' },
    spec: {
      replicas,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels, ...(extra.annotations ? { annotations: extra.annotations } : {}) },
        spec: {
          terminationGracePeriodSeconds: 1,
          topologySpreadConstraints: [
            {
              maxSkew: 1,
              topologyKey: 'kubernetes.io/hostname',
              whenUnsatisfiable: 'DoNotSchedule',
              labelSelector: { matchLabels: labels },
            },
          ],
          containers: [
            {
              name: 'netexec',
              image: AGNHOST,
              args: ['netexec', '--http-port=8080', '--udp-port=8081'],
              ports: [
                {
                  containerPort: 8080,
                  protocol: 'TCP',
                  ...(extra.hostPort ? { hostPort: extra.hostPort } : {}),
                },
                { containerPort: 8081, protocol: 'UDP' },
              ],
              readinessProbe: { httpGet: { path: '/healthz', port: 8080 }, periodSeconds: 2 },
            },
          ],
        },
      },
    },
  };
}

export async function waitDeployment(cluster: KubeCluster, name: string, timeoutS = 240): Promise<void> {
  const r = await cluster.kubectl(['rollout', 'status', `deployment/${name}`, `--timeout=${timeoutS}s`], {
    timeoutMs: (timeoutS + 30) * 1000,
  });
  if (r.code !== 0) {
    const pods = await cluster.kubectl(['get', 'pods', '-o', 'wide']);
    const ev = await cluster.kubectl(['get', 'events', '--sort-by=.lastTimestamp']);
    throw new Error(
      `deployment ${name} not ready: ${r.stderr}\n${pods.stdout}\n${ev.stdout.split('\n').slice(-20).join('\n')}`,
    );
  }
}

/** Running pods matching a label selector. */
export async function pods(
  cluster: KubeCluster,
  selector: string,
  namespace = 'default',
): Promise<PodInfo[]> {
  const out = await cluster.kubectlOk(['-n', namespace, 'get', 'pods', '-l', selector, '-o', 'json']);
  const list = JSON.parse(out) as {
    items: {
      metadata: { name: string; uid: string; deletionTimestamp?: string };
      spec: { nodeName: string };
      status: { phase: string; podIP?: string; podIPs?: { ip: string }[] };
    }[];
  };
  return list.items
    .filter(
      (p) => p.status.phase === 'Running' && p.metadata.deletionTimestamp === undefined && p.status.podIP,
    )
    .map((p) => ({
      name: p.metadata.name,
      uid: p.metadata.uid,
      ip: p.status.podIP as string,
      ips: (p.status.podIPs ?? []).map((i) => i.ip),
      node: p.spec.nodeName,
    }));
}

/** Each node's spec.podCIDRs. */
export async function nodePodCIDRs(cluster: KubeCluster): Promise<Map<string, string[]>> {
  const out = await cluster.kubectlOk(['get', 'nodes', '-o', 'json']);
  const list = JSON.parse(out) as { items: { metadata: { name: string }; spec: { podCIDRs?: string[] } }[] };
  return new Map(list.items.map((n) => [n.metadata.name, n.spec.podCIDRs ?? []]));
}

/** `kubectl exec POD -- CMD...`. */
export function execPod(
  cluster: KubeCluster,
  pod: string,
  cmd: string[],
  namespace = 'default',
  container?: string,
): Promise<Run> {
  const c = container === undefined ? [] : ['-c', container];
  return cluster.kubectl(['-n', namespace, 'exec', pod, ...c, '--', ...cmd], { timeoutMs: 60_000 });
}

/** An HTTP GET from inside a pod (curl in the agnhost image): the body, or an error with curl's code. */
export async function podGet(cluster: KubeCluster, pod: string, url: string): Promise<string> {
  const r = await execPod(cluster, pod, ['curl', '-sS', '-m', '5', url]);
  if (r.code !== 0) throw new Error(`${pod}: curl ${url}: exit ${r.code}: ${r.stderr.trim()}`);
  return r.stdout.trim();
}

/** A UDP request from inside a pod to agnhost netexec's UDP port: its answer. */
export async function podUdp(
  cluster: KubeCluster,
  pod: string,
  host: string,
  port: number,
  msg: string,
): Promise<string> {
  const r = await execPod(cluster, pod, ['sh', '-c', `echo ${msg} | nc -u -w 2 ${host} ${port}`]);
  return r.stdout.trim();
}

export function ipv4InCidr(ip: string, cidr: string): boolean {
  const [net, len] = cidr.split('/');
  if (net === undefined || len === undefined || net.includes(':') || ip.includes(':')) return false;
  const n = (a: string) => a.split('.').reduce((acc, o) => acc * 256 + Number(o), 0);
  const size = 2 ** (32 - Number(len));
  return Math.floor(n(ip) / size) === Math.floor(n(net) / size);
}

/** A plain host on the underlay: a namespace of the bed running agnhost netexec on 8080 (TCP) and 8081 (UDP). */
export class UnderlayHost {
  ul: UnderlayNode | undefined;
  #server: Daemon | undefined;
  readonly #cluster: KubeCluster;

  constructor(cluster: KubeCluster) {
    this.#cluster = cluster;
  }

  get ip(): string {
    return (this.ul as UnderlayNode).ip;
  }

  async setup(): Promise<this> {
    this.ul = await this.#cluster.underlay.addNode('host');
    const argv = [
      'nsenter',
      `--net=/run/netns/${this.ul.ns}`,
      '--',
      join(this.#cluster.bin, 'agnhost'),
      'netexec',
      '--http-port=8080',
      '--udp-port=8081',
    ];
    this.#server = new Daemon('underlay-host/netexec', argv, join(this.#cluster.dir, 'underlay-host.log'));
    this.#server.start();
    for (let i = 0; i < 100; i++) {
      if ((await this.curl(`http://${this.ip}:8080/healthz`)).code === 0) return this;
      await sleep(100);
    }
    throw new Error(`underlay host: netexec not answering:\n${this.#server.tail()}`);
  }

  /** curl from the host's namespace. */
  curl(url: string, extra: string[] = []): Promise<Run> {
    return run(
      'ip',
      ['netns', 'exec', (this.ul as UnderlayNode).ns, 'curl', '-sS', '-m', '5', ...extra, url],
      { timeoutMs: 60_000 },
    );
  }

  /** A shell command in the host's namespace. */
  sh(cmd: string): Promise<Run> {
    return run('ip', ['netns', 'exec', (this.ul as UnderlayNode).ns, 'bash', '-c', cmd], {
      timeoutMs: 60_000,
    });
  }

  /** One UDP datagram from the host's namespace (bash's /dev/udp; no netcat here): the answer. */
  async udp(ip: string, port: number, msg: string): Promise<string> {
    const r = await this.sh(
      `exec 3<>/dev/udp/${ip}/${port}; printf '%s' '${msg}' >&3; timeout 3 dd bs=512 count=1 <&3 2>/dev/null`,
    );
    return r.stdout.trim();
  }

  async cleanup(): Promise<void> {
    await this.#server?.stop();
    if (this.ul) await this.#cluster.underlay.removeNode(this.ul);
  }
}

/** Polls `ok` until it holds; throws after `timeoutMs`. */
export async function waitFor(
  ok: () => Promise<boolean>,
  timeoutMs = 120_000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`${what}: not met after ${timeoutMs} ms`);
    await sleep(1000);
  }
}
