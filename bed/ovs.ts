/**
 * A private Open vSwitch for one test node (I7): its own database file, ovsdb-server and ovs-vswitchd,
 * both started with `ip netns exec NODE` so every port and internal interface lives in the node
 * namespace, and everything they write (sockets, logs, BRIDGE.mgmt) in one temporary directory.
 * Never the machine's /etc/openvswitch or /run/openvswitch. `stop` ends both daemons and removes the
 * directory, pass or fail.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { must, run } from './exec.js';

const SCHEMA = '/usr/share/openvswitch/vswitch.ovsschema';

/** True when the OVS userspace tools this bed needs are installed. */
export function ovsAvailable(): boolean {
  return existsSync(SCHEMA) && existsSync('/usr/sbin/ovs-vswitchd') && existsSync('/usr/sbin/ovsdb-server');
}

export class OvsInstance {
  readonly nodeNs: string;
  readonly dir: string;
  /** `unix:DIR/db.sock`, the agent's `ovsdb` key. */
  readonly ovsdb: string;
  readonly #children: ChildProcess[] = [];
  #vswitchd: ChildProcess | undefined;
  #vswitchdArgs: string[] = [];
  readonly #env: NodeJS.ProcessEnv;
  /** What the daemons wrote to stderr, for failure messages. */
  stderr = '';

  private constructor(nodeNs: string) {
    this.nodeNs = nodeNs;
    this.dir = mkdtempSync(join(tmpdir(), 'pwt-ovs-'));
    this.ovsdb = `unix:${join(this.dir, 'db.sock')}`;
    this.#env = {
      ...process.env,
      OVS_RUNDIR: this.dir,
      OVS_DBDIR: this.dir,
      OVS_LOGDIR: this.dir,
      OVS_SYSCONFDIR: this.dir,
    };
  }

  /** Creates the database and starts both daemons in `nodeNs`; cleans up after itself on failure. */
  static async start(nodeNs: string): Promise<OvsInstance> {
    const ovs = new OvsInstance(nodeNs);
    try {
      const db = join(ovs.dir, 'conf.db');
      await must('ovsdb-tool', ['create', db, SCHEMA]);
      ovs.#spawn('ovsdb-server', [
        db,
        `--remote=punix:${join(ovs.dir, 'db.sock')}`,
        `--unixctl=${join(ovs.dir, 'ovsdb-server.ctl')}`,
        `--log-file=${join(ovs.dir, 'ovsdb-server.log')}`,
        '--no-chdir',
        '-vconsole:off',
      ]);
      await ovs.#waitFor(join(ovs.dir, 'db.sock'));
      const init = await run('ovs-vsctl', [`--db=${ovs.ovsdb}`, '--no-wait', 'init'], { env: ovs.#env });
      if (init.code !== 0) throw new Error(`ovs-vsctl init: ${init.stderr}`);
      ovs.#vswitchdArgs = [
        ovs.ovsdb,
        `--unixctl=${join(ovs.dir, 'ovs-vswitchd.ctl')}`,
        `--log-file=${join(ovs.dir, 'ovs-vswitchd.log')}`,
        '--no-chdir',
        '-vconsole:off',
      ];
      ovs.#vswitchd = ovs.#spawn('ovs-vswitchd', ovs.#vswitchdArgs);
      await ovs.#waitFor(join(ovs.dir, 'ovs-vswitchd.ctl'));
      return ovs;
    } catch (err) {
      await ovs.stop();
      throw err;
    }
  }

  /** The switch argument of ovs-ofctl for `bridge`. */
  target(bridge: string): string {
    return `unix:${join(this.dir, `${bridge}.mgmt`)}`;
  }

  /** Runs `ovs-ofctl -O OpenFlow15 CMD TARGET ARGS...`; rejects on failure. */
  ofctl(cmd: string, bridge: string, ...args: string[]): Promise<string> {
    return must('ovs-ofctl', ['-O', 'OpenFlow15', cmd, this.target(bridge), ...args]);
  }

  /** Runs `ovs-vsctl --db=... ARGS...`; rejects on failure. */
  async vsctl(...args: string[]): Promise<string> {
    const r = await run('ovs-vsctl', [`--db=${this.ovsdb}`, ...args], { env: this.#env });
    if (r.code !== 0) throw new Error(`ovs-vsctl ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  }

  /** ovs-vswitchd's PID (e.g. to SIGSTOP it). */
  get vswitchdPid(): number | undefined {
    return this.#vswitchd?.pid;
  }

  /**
   * A switch crash and restart: SIGKILL to ovs-vswitchd, then the same command again; resolves once
   * its control socket is back. The database (bridges, ports) is untouched; the flows are gone.
   */
  async restartVswitchd(): Promise<void> {
    const old = this.#vswitchd;
    if (old && old.exitCode === null && old.signalCode === null) {
      const exited = new Promise((res) => old.once('exit', res));
      old.kill('SIGKILL');
      await exited;
    }
    this.#children.splice(this.#children.indexOf(old as ChildProcess), 1);
    rmSync(join(this.dir, 'ovs-vswitchd.ctl'), { force: true });
    this.#vswitchd = this.#spawn('ovs-vswitchd', this.#vswitchdArgs);
    await this.#waitFor(join(this.dir, 'ovs-vswitchd.ctl'));
  }

  /** Stops both daemons (SIGTERM, then SIGKILL after 5 s) and removes the directory. Idempotent. */
  async stop(): Promise<void> {
    for (const child of this.#children.reverse()) {
      if (child.exitCode !== null || child.signalCode !== null) continue;
      const exited = new Promise((res) => child.once('exit', res));
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(killer);
    }
    this.#children.length = 0;
    rmSync(this.dir, { recursive: true, force: true });
  }

  #spawn(daemon: string, args: string[]): ChildProcess {
    // `ip netns exec` execs the daemon in place, so the child's PID is the daemon's.
    const child = spawn('ip', ['netns', 'exec', this.nodeNs, daemon, ...args], {
      env: this.#env,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child.stderr?.on('data', (d: Buffer) => {
      this.stderr += d.toString();
    });
    this.#children.push(child);
    return child;
  }

  async #waitFor(path: string): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (!existsSync(path)) {
      const dead = this.#children.find((c) => c.exitCode !== null);
      if (dead) throw new Error(`OVS daemon exited ${dead.exitCode}: ${this.stderr}`);
      if (Date.now() > deadline) throw new Error(`${path} did not appear: ${this.stderr}`);
      await sleep(10);
    }
  }
}
