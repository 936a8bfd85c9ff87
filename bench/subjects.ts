/**
 * The plugins under measurement, each on its own fresh node namespace with a driver inside it:
 * - podwire: the agent (started like the tests start it, bed/node.ts) and the relay;
 * - podwire-ovs: the same on the OVS datapath, the node with its own Open vSwitch (src/bed/ovs.ts,
 *   userspace netdev datapath) and an OVS bridge (scenario 4 only: the reference has no OVS peer);
 * - reference: Debian's `bridge` + `host-local` from /usr/lib/cni, with its own `dataDir`.
 * Both get an equivalent network: one bridge named `podwire0`, one IPv4 /22, the gateway (.1) on the
 * bridge, a default route in the pod, MTU 1500, no masquerade.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { netnsPath } from '../bed/namespaces.js';
import { AGENT_NODE_FLAGS, RELAY, TestNode } from '../bed/node.js';
import { DriverClient } from './driver-client.js';
import type { ExecSpec } from './exec-batch.js';
import { createNodeNamespace, type Pod } from './pods.js';
import type { Teardown } from './teardown.js';

export const POD_CIDR = '10.244.0.0/22';
export const BRIDGE = 'podwire0';
export const CNI_VERSION = '1.0.0';
export const REFERENCE_DIR = '/usr/lib/cni';

export type SubjectName = 'podwire' | 'podwire-ovs' | 'reference';
export type CniCommand = 'ADD' | 'DEL' | 'VERSION';

export interface Subject {
  readonly name: SubjectName;
  readonly nodeNs: string;
  readonly driver: DriverClient;
  /** The exec a runtime would do for `command` on `pod`. */
  call(command: CniCommand, pod: Pod): ExecSpec;
  /** The agent, for podwire; the reference has no long-running process. */
  readonly agent: AgentProbe | undefined;
}

/** What the bench reads from a running agent. */
export interface AgentProbe {
  readonly pid: number;
  /** VmRSS from /proc/PID/status, in KiB. */
  rssKiB(): number;
  /** Entries of /proc/PID/fd. */
  fds(): number;
  /** Waits (up to `timeoutMs`) for the descriptor count to come down to `baseline`; returns the last count. */
  settleFds(baseline: number, timeoutMs?: number): Promise<number>;
  /** Where the agent's next log line will start, to read only what a batch produced. */
  logOffset(): number;
  logsSince(offset: number): string;
  /** SIGTERM and wait: the agent exits cleanly (and writes its --cpu-prof profile). */
  stop(): Promise<void>;
}

function cniEnv(command: CniCommand, pod: Pod, cniPath: string): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
    CNI_COMMAND: command,
    CNI_CONTAINERID: pod.containerId,
    CNI_NETNS: netnsPath(pod.ns),
    CNI_IFNAME: 'eth0',
    CNI_PATH: cniPath,
  };
}

export interface PodwireOptions {
  /** Directory for the agent's --cpu-prof output; no profiling when absent. */
  cpuProfDir?: string;
  /** More node flags for the agent (e.g. --max-semi-space-size=16, --heapsnapshot-signal=SIGUSR2). */
  nodeFlags?: string[];
  /** 'ovs': the subject is 'podwire-ovs', on the node's private OVS; default the Linux bridge. */
  datapath?: 'linux-bridge' | 'ovs';
}

export async function startPodwire(teardown: Teardown, opts: PodwireOptions = {}): Promise<Subject> {
  const flags = [
    ...AGENT_NODE_FLAGS,
    ...(opts.nodeFlags ?? []),
    ...(opts.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${opts.cpuProfDir}`] : []),
  ];
  const ovs = opts.datapath === 'ovs';
  // On OVS the bridge keeps the bed's default name (br-podwire): the same pod network either way.
  const node = new TestNode({
    podCIDRs: [POD_CIDR],
    nodeFlags: flags,
    ...(ovs ? { datapath: 'ovs' } : { bridge: BRIDGE }),
  });
  teardown.add('podwire node', () => node.cleanup());
  await node.setup();
  const driver = DriverClient.start(node.nodeNs);
  teardown.add('podwire driver', () => driver.stop());
  const stdin = JSON.stringify({
    cniVersion: CNI_VERSION,
    name: 'bench',
    type: 'podwire',
    socket: node.socket,
  });
  const pid = node.agentPid;
  const fds = (): number => readdirSync(`/proc/${pid}/fd`).length;
  const agent: AgentProbe = {
    pid,
    rssKiB: () => {
      const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (!m) throw new Error(`no VmRSS in /proc/${pid}/status`);
      return Number(m[1]);
    },
    fds,
    settleFds: async (baseline, timeoutMs = 2000) => {
      // A connection's socket closes a few event-loop turns after the relay has its answer.
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const n = fds();
        if (n <= baseline || Date.now() > deadline) return n;
        await sleep(10);
      }
    },
    logOffset: () => node.logs.lastIndexOf('\n') + 1,
    logsSince: (offset) => node.logs.slice(offset),
    stop: async () => {
      await node.stopAgent('SIGTERM');
    },
  };
  return {
    name: ovs ? 'podwire-ovs' : 'podwire',
    nodeNs: node.nodeNs,
    driver,
    agent,
    call: (command, pod) => ({
      tag: `${command} ${pod.containerId}`,
      file: RELAY,
      env: cniEnv(command, pod, REFERENCE_DIR),
      stdin,
    }),
  };
}

export async function startReference(teardown: Teardown): Promise<Subject> {
  const nodeNs = await createNodeNamespace(teardown, 'refnode');
  // host-local's state goes here, never to /var/lib/cni.
  const dataDir = mkdtempSync(join(tmpdir(), 'pwb-host-local-'));
  teardown.add('host-local dataDir', () => rmSync(dataDir, { recursive: true, force: true }));
  const driver = DriverClient.start(nodeNs);
  teardown.add('reference driver', () => driver.stop());
  const stdin = JSON.stringify({
    cniVersion: CNI_VERSION,
    name: 'bench',
    type: 'bridge',
    bridge: BRIDGE,
    isGateway: true,
    ipMasq: false,
    mtu: 1500,
    ipam: { type: 'host-local', ranges: [[{ subnet: POD_CIDR }]], routes: [{ dst: '0.0.0.0/0' }], dataDir },
  });
  return {
    name: 'reference',
    nodeNs,
    driver,
    agent: undefined,
    call: (command, pod) => ({
      tag: `${command} ${pod.containerId}`,
      file: join(REFERENCE_DIR, 'bridge'),
      env: cniEnv(command, pod, REFERENCE_DIR),
      stdin,
    }),
  };
}

/** Starts both subjects of a scenario, each on a fresh node namespace. */
export async function startBoth(teardown: Teardown, opts: PodwireOptions = {}): Promise<Subject[]> {
  return [await startPodwire(teardown, opts), await startReference(teardown)];
}
