/**
 * A private Open vSwitch for one test node (I7): its own database file, ovsdb-server and ovs-vswitchd,
 * both started with `ip netns exec NODE` so every port and internal interface lives in the node
 * namespace, and everything they write (sockets, logs, BRIDGE.mgmt) in one temporary directory.
 * Never the machine's /etc/openvswitch or /run/openvswitch. `stop` ends both daemons and removes the
 * directory, pass or fail; on the kernel datapath it first has ovs-vswitchd delete its datapath.
 *
 * The one switch of the datapath type every OVS test runs on is here (OVS_DATAPATH).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { must, run } from './exec.js';

const SCHEMA = '/usr/share/openvswitch/vswitch.ovsschema';

export type OvsDaemon = 'ovsdb-server' | 'ovs-vswitchd';

export type OvsDatapathType = 'system' | 'netdev';

/**
 * The OVS datapath type of every OVS test, from PODWIRE_OVS_DATAPATH: `netdev` (the default), the
 * userspace datapath, which needs no kernel module; `system`, the kernel's openvswitch module (the
 * agent's default), which this machine's kernel lacks: `npm run test:vm` runs the OVS suites with it
 * in a guest on Debian's kernel (scripts/vm-kernel-test.sh).
 */
export const OVS_DATAPATH: OvsDatapathType = datapathTypeFrom(process.env.PODWIRE_OVS_DATAPATH);

function datapathTypeFrom(value: string | undefined): OvsDatapathType {
  if (value === undefined || value === '') return 'netdev';
  if (value === 'system' || value === 'netdev') return value;
  throw new Error(`PODWIRE_OVS_DATAPATH=${value}: not one of system, netdev`);
}

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
      await must('ovsdb-tool', ['create', join(ovs.dir, 'conf.db'), SCHEMA]);
      await ovs.startDaemon('ovsdb-server');
      const init = await run('ovs-vsctl', [`--db=${ovs.ovsdb}`, '--no-wait', 'init'], { env: ovs.#env });
      if (init.code !== 0) throw new Error(`ovs-vsctl init: ${init.stderr}`);
      await ovs.startDaemon('ovs-vswitchd');
      return ovs;
    } catch (err) {
      await ovs.stop();
      throw err;
    }
  }

  /**
   * Starts one daemon (again, after `killDaemon`) with the arguments it always gets, and resolves once
   * its control socket (ovsdb-server: also db.sock) is there. No flow restore, unlike Debian's init
   * script: a restarted ovs-vswitchd starts with an empty flow table.
   */
  async startDaemon(daemon: OvsDaemon): Promise<void> {
    const ctl = join(this.dir, `${daemon}.ctl`);
    rmSync(ctl, { force: true });
    const common = [
      `--unixctl=${ctl}`,
      `--log-file=${join(this.dir, `${daemon}.log`)}`,
      '--no-chdir',
      '-vconsole:off',
    ];
    if (daemon === 'ovsdb-server') {
      const sock = join(this.dir, 'db.sock');
      rmSync(sock, { force: true });
      this.#spawn(daemon, [join(this.dir, 'conf.db'), `--remote=punix:${sock}`, ...common]);
      await this.#waitFor(sock);
    } else {
      this.#spawn(daemon, [this.ovsdb, ...common]);
    }
    await this.#waitFor(ctl);
  }

  /** Kills one daemon with `signal` (SIGKILL: no cleanup at all) and waits until it has exited. */
  async killDaemon(daemon: OvsDaemon, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const child = this.#running(daemon);
    if (!child) throw new Error(`${daemon} is not running`);
    const exited = new Promise((res) => child.once('exit', res));
    child.kill(signal);
    await exited;
    this.#children.splice(this.#children.indexOf(child), 1);
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
    return this.#running('ovs-vswitchd')?.pid;
  }

  /**
   * A switch crash and restart: SIGKILL to ovs-vswitchd, then the same command again; resolves once
   * its control socket is back. The database (bridges, ports) is untouched; the flows are gone.
   */
  async restartVswitchd(): Promise<void> {
    if (this.#running('ovs-vswitchd')) await this.killDaemon('ovs-vswitchd');
    await this.startDaemon('ovs-vswitchd');
  }

  #running(daemon: OvsDaemon): ChildProcess | undefined {
    return this.#children.find(
      (c) => c.spawnargs.includes(daemon) && c.exitCode === null && c.signalCode === null,
    );
  }

  /**
   * Stops both daemons (SIGTERM, then SIGKILL after 5 s) and removes the directory. Idempotent. A
   * kernel datapath outlives the ovs-vswitchd that made it (with its internal ports, until the
   * namespace goes), so on `system` ovs-vswitchd is first told to exit deleting it.
   */
  async stop(): Promise<void> {
    const vswitchd = this.#running('ovs-vswitchd');
    if (OVS_DATAPATH === 'system' && vswitchd) {
      const exited = new Promise((res) => vswitchd.once('exit', res));
      const ctl = join(this.dir, 'ovs-vswitchd.ctl');
      const r = await run('ovs-appctl', [`--target=${ctl}`, '--timeout=10', 'exit', '--cleanup'], {
        env: this.#env,
      });
      // A daemon that did not answer is ended below like the other; its datapath then goes with the namespace.
      if (r.code === 0) await Promise.race([exited, sleep(10_000)]);
    }
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
