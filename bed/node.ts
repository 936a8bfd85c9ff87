/**
 * A podwire node for tests: a throwaway "node" namespace with an agent running inside it (I7), its
 * own state directory and socket, and pods (namespaces) added through the real relay.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { stringify as stringifyYaml } from 'yaml';
import { DEFAULT_CONFIG } from '../src/agent/config.js';
import { AGENT_NODE_FLAGS, AGENT_THREADPOOL_SIZE } from '../src/agent/runtime.js';
import { patient } from './emulation.js';
import { type Run, run } from './exec.js';
import { NamespaceSet, netnsPath } from './namespaces.js';
import { OVS_DATAPATH, OvsInstance } from './ovs.js';

export const ROOT = resolve(import.meta.dirname, '../..');
export const RELAY = join(ROOT, 'bin/podwire-cni');
const MAIN = join(ROOT, 'dist/src/cli/main.js');

export { AGENT_NODE_FLAGS } from '../src/agent/runtime.js';

export interface NodeOptions {
  podCIDRs?: string[];
  bridge?: string;
  mtu?: number;
  maxParallel?: number;
  /** A node namespace made by the caller (e.g. a cluster bed with an uplink); else one is created. */
  nodeNs?: string;
  /** More agent configuration keys; a key set to null is left out of the file. */
  config?: Record<string, unknown>;
  /** Node flags for the agent process; default AGENT_NODE_FLAGS (the bench adds --cpu-prof). */
  nodeFlags?: string[];
  /**
   * `ovs`: the node gets a private Open vSwitch (bed/ovs.ts; datapath type OVS_DATAPATH, userspace
   * unless PODWIRE_OVS_DATAPATH says otherwise) and the agent runs `datapath: ovs` on bridge
   * br-podwire unless `bridge` says otherwise.
   */
  datapath?: 'linux-bridge' | 'ovs';
}

export interface CniCall {
  command: 'ADD' | 'DEL' | 'CHECK' | 'GC' | 'STATUS' | 'VERSION';
  containerId?: string;
  netns?: string;
  ifname?: string;
  cniVersion?: string;
  /** Extra keys merged into the network configuration. */
  conf?: Record<string, unknown>;
  /** Overrides of the environment (undefined removes a variable). */
  env?: Record<string, string | undefined>;
  /** Raw stdin instead of the generated configuration. */
  stdin?: string;
}

export interface CniOutcome extends Run {
  json: Record<string, unknown> | undefined;
}

export class TestNode {
  readonly ns: NamespaceSet;
  readonly dir: string;
  readonly socket: string;
  readonly configPath: string;
  readonly options: Required<Omit<NodeOptions, 'nodeNs' | 'config' | 'nodeFlags'>>;
  /** The node's private OVS, when `datapath` is 'ovs'; running from setup() to cleanup(). */
  ovs: OvsInstance | undefined;
  readonly #given: Pick<NodeOptions, 'nodeNs' | 'config'>;
  readonly #nodeFlags: readonly string[];
  nodeNs = '';
  agent: ChildProcess | undefined;
  /** Everything the agent wrote to stderr (JSON lines). */
  logs = '';

  constructor(options: NodeOptions = {}) {
    this.ns = new NamespaceSet();
    this.dir = mkdtempSync(join(tmpdir(), 'pwt-'));
    this.socket = join(this.dir, 'cni.sock');
    this.configPath = join(this.dir, 'agent.yaml');
    this.options = {
      podCIDRs: options.podCIDRs ?? ['10.244.1.0/24', 'fd00:10:244:1::/64'],
      datapath: options.datapath ?? 'linux-bridge',
      bridge: options.bridge ?? (options.datapath === 'ovs' ? 'br-podwire' : 'podwire0'),
      mtu: options.mtu ?? 1500,
      maxParallel: options.maxParallel ?? DEFAULT_CONFIG.maxParallel,
    };
    this.#given = { nodeNs: options.nodeNs, config: options.config };
    this.#nodeFlags = options.nodeFlags ?? AGENT_NODE_FLAGS;
  }

  /** `until`: the agent's log line that ends the wait (startAgent). */
  async setup(until?: string): Promise<this> {
    this.nodeNs = this.#given.nodeNs ?? (await this.ns.add('node'));
    await run('ip', ['-n', this.nodeNs, 'link', 'set', 'lo', 'up']);
    const o = this.options;
    if (o.datapath === 'ovs') this.ovs = await OvsInstance.start(this.nodeNs);
    const config: Record<string, unknown> = {
      podCIDRs: o.podCIDRs,
      datapath: o.datapath,
      bridge: o.bridge,
      ...(this.ovs ? { ovsdb: this.ovs.ovsdb, ovsDatapathType: OVS_DATAPATH } : {}),
      mtu: o.mtu,
      socket: this.socket,
      stateDir: join(this.dir, 'state'),
      maxParallel: o.maxParallel,
      ...this.#given.config,
    };
    for (const [k, v] of Object.entries(config)) if (v === null) delete config[k];
    writeFileSync(this.configPath, stringifyYaml(config));
    await this.startAgent(until);
    return this;
  }

  /** The agent's command line after `node FLAGS`: `podwire agent --config FILE` (a test may run another entry). */
  protected agentArgs(): string[] {
    return [MAIN, 'agent', '--config', this.configPath];
  }

  /**
   * Starts the agent and waits for its "agent started" line, or for the `until` message (`msg` of a
   * log line; e.g. a step in the middle of the start).
   */
  async startAgent(until = 'agent started'): Promise<void> {
    const child = spawn(
      'ip',
      ['netns', 'exec', this.nodeNs, process.execPath, ...this.#nodeFlags, ...this.agentArgs()],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { ...process.env, UV_THREADPOOL_SIZE: String(AGENT_THREADPOOL_SIZE) },
      },
    );
    this.agent = child;
    const from = this.logs.length;
    const line = `"msg":"${until}"`;
    // Resolved from the stderr handler itself, not by polling: a test that signals the agent at a
    // line in the middle of its start (finding 11) does so while the agent is still there.
    let seen: () => void = () => undefined;
    const started = new Promise<void>((res) => {
      seen = res;
    });
    child.stderr?.on('data', (d: Buffer) => {
      this.logs += d.toString();
      if (this.logs.includes(line, from)) seen();
    });
    const exited = new Promise<never>((_, rej) =>
      child.once('exit', (code) => rej(new Error(`agent exited ${code}: ${this.logs}`))),
    );
    exited.catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, rej) => {
      timer = setTimeout(() => rej(new Error(`agent did not start: ${this.logs}`)), patient(15_000));
    });
    try {
      await Promise.race([started, exited, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  get agentPid(): number {
    const pid = this.agent?.pid;
    if (pid === undefined) throw new Error('agent not running');
    return pid;
  }

  /** The agent's open descriptors (I2), as "fd -> target" for messages. */
  openFds(): string[] {
    const dir = `/proc/${this.agentPid}/fd`;
    return readdirSync(dir).map((fd) => {
      try {
        return `${fd} -> ${readlinkSync(`${dir}/${fd}`)}`;
      } catch {
        return `${fd} -> (closed while listing)`;
      }
    });
  }

  /**
   * Waits until the agent holds exactly `baseline` descriptors. A connection's socket is closed a few
   * event-loop turns after the relay has its answer, so a count taken at once can be one high for a
   * moment; a leak stays. Returns the descriptors held at the deadline (or at equality).
   */
  async settleFds(baseline: number, timeoutMs = 2000): Promise<string[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const fds = this.openFds();
      if (fds.length === baseline || Date.now() > deadline) return fds;
      await sleep(10);
    }
  }

  async stopAgent(signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    const child = this.agent;
    if (!child || child.exitCode !== null || child.signalCode !== null) return child?.exitCode ?? null;
    const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
    child.kill(signal);
    const code = await exited;
    this.agent = undefined;
    return code;
  }

  /**
   * The claims in the agent's IPAM store, read from its files (one file per address; names starting
   * with '.' are records being written, not claims).
   */
  claims(): Array<{ ip: string; containerId: string; ifname: string }> {
    const root = join(this.dir, 'state', 'ipam');
    if (!existsSync(root)) return [];
    const out: Array<{ ip: string; containerId: string; ifname: string }> = [];
    for (const range of readdirSync(root)) {
      for (const file of readdirSync(join(root, range))) {
        if (file.startsWith('.')) continue;
        const rec = JSON.parse(readFileSync(join(root, range, file), 'utf8')) as {
          containerId: string;
          ifname: string;
        };
        out.push({ ip: file.replaceAll('_', ':'), containerId: rec.containerId, ifname: rec.ifname });
      }
    }
    return out;
  }

  async addPod(role = 'pod'): Promise<string> {
    return this.ns.add(role);
  }

  /** Calls the real relay, as a runtime would. */
  async cni(call: CniCall): Promise<CniOutcome> {
    const env: Record<string, string | undefined> = {
      PATH: process.env.PATH,
      CNI_COMMAND: call.command,
      CNI_CONTAINERID: call.containerId,
      CNI_NETNS:
        call.netns === undefined
          ? undefined
          : call.netns.startsWith('/')
            ? call.netns
            : netnsPath(call.netns),
      CNI_IFNAME: call.ifname ?? (call.containerId ? 'eth0' : undefined),
      CNI_PATH: '/opt/cni/bin',
      ...call.env,
    };
    for (const k of Object.keys(env)) if (env[k] === undefined) delete env[k];
    const stdin =
      call.stdin ??
      JSON.stringify({
        cniVersion: call.cniVersion ?? '1.1.0',
        name: 'podwire',
        type: 'podwire',
        socket: this.socket,
        ...call.conf,
      });
    const r = await run(RELAY, [], { env: env as NodeJS.ProcessEnv, input: stdin });
    let json: Record<string, unknown> | undefined;
    try {
      json = r.stdout.trim() === '' ? undefined : (JSON.parse(r.stdout) as Record<string, unknown>);
    } catch {
      json = undefined;
    }
    return { ...r, json };
  }

  async cleanup(): Promise<void> {
    await this.stopAgent('SIGKILL');
    await this.ovs?.stop();
    await this.ns.cleanup();
    if (existsSync(this.dir)) rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The addresses ("ip/len") an ADD result reports. */
export function resultAddresses(out: CniOutcome): string[] {
  const ips = (out.json?.ips ?? []) as Array<{ address: string }>;
  return ips.map((ip) => ip.address);
}

/** The addresses of an ADD result without their prefix length. */
export function resultIps(out: CniOutcome): string[] {
  return resultAddresses(out).map((a) => a.split('/')[0] as string);
}
