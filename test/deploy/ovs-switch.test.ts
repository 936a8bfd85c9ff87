/**
 * deploy/ovs-switch.mjs, the DaemonSet's ovs container and ovs-module init container, run for real on
 * this machine: the real ovsdb-server and ovs-vswitchd (Debian's openvswitch-switch), each run in a
 * throwaway network namespace, with a temp directory standing for the host's /run/openvswitch (the
 * `ovsdb` key of the agent configuration the script reads) and /var/lib/openvswitch
 * (PODWIRE_OVS_DB_DIR). The datapath is `netdev`, the userspace one: this machine has no openvswitch
 * kernel module, so `system` is exercised only by load-module, which must fail saying so.
 *
 * Each test leaves nothing behind, pass or fail: no process started from its directory, no namespace,
 * no directory; `after` checks.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { must, run } from '../../bed/exec.js';
import { ovsAvailable } from '../../bed/ovs.js';
import { DEPLOY_DIR, findOne, type K8sObject, loadManifests } from './manifests.js';

const SCRIPT = join(DEPLOY_DIR, 'ovs-switch.mjs');
const SCHEMA = '/usr/share/openvswitch/vswitch.ovsschema';
const configMap = findOne<K8sObject & { data: Record<string, string> }>(loadManifests(), 'ConfigMap');
/** The ConfigMap's agent.yaml, as shipped: datapath linux-bridge. */
const AGENT_YAML = configMap.data['agent.yaml'] as string;
const skip =
  process.getuid?.() !== 0
    ? 'needs root (network namespaces)'
    : !ovsAvailable()
      ? 'needs ovsdb-server and ovs-vswitchd (openvswitch-switch)'
      : false;

/** Directories and namespaces the tests made; `after` checks every one is gone. */
const made: Array<{ dir: string; ns: string }> = [];

/** Processes whose command line names `text`, as "PID CMDLINE". */
function processesNaming(text: string): string[] {
  const out: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
    } catch {
      continue;
    }
    if (cmdline.includes(text)) out.push(`${pid} ${cmdline.trim()}`);
  }
  return out;
}

/** Children of `pid`. */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const p of readdirSync('/proc').filter((x) => /^\d+$/.test(x))) {
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(p));
    } catch {}
  }
  return out;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitFor(what: string, cond: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

interface Supervisor {
  child: ChildProcess;
  stderr(): string;
  /** Resolves with the exit code (or the signal's name). */
  exited: Promise<number | string>;
}

class Bed {
  readonly dir = mkdtempSync(join(tmpdir(), 'pwt-ovssw-'));
  readonly ns = `pwt-ovssw-${process.pid}-${made.length}`;
  readonly runDir = join(this.dir, 'run');
  readonly dbDir = join(this.dir, 'db');
  readonly config = join(this.dir, 'agent.yaml');
  readonly dbSock = join(this.runDir, 'db.sock');
  readonly supervisors: Supervisor[] = [];

  constructor(datapath: 'linux-bridge' | 'ovs', type: 'netdev' | 'system' = 'netdev') {
    made.push({ dir: this.dir, ns: this.ns });
    mkdirSync(this.runDir);
    // The shipped ConfigMap with its one key changed; with ovs, the socket moved into the temp
    // directory (the DaemonSet's default is /run/openvswitch/db.sock) and the datapath type set.
    const yaml =
      datapath === 'linux-bridge'
        ? AGENT_YAML
        : `${AGENT_YAML.replace(/^datapath: linux-bridge$/m, 'datapath: ovs')}ovsDatapathType: ${type}\novsdb: unix:${this.dbSock}\n`;
    writeFileSync(this.config, yaml);
  }

  get env(): NodeJS.ProcessEnv {
    return { PATH: process.env.PATH, PODWIRE_CONFIG: this.config, PODWIRE_OVS_DB_DIR: this.dbDir };
  }

  async setup(): Promise<void> {
    await must('ip', ['netns', 'add', this.ns]);
  }

  /**
   * `node ovs-switch.mjs run`, in the namespace (`ip netns exec` execs node: the child is the script).
   * `container`: in a PID namespace of its own, as in a container, under `unshare --kill-child`:
   * SIGKILL to the child kills the script and every daemon at once, and the kernel reaps them all.
   */
  start(opts: { container?: boolean } = {}): Supervisor {
    const inner = [process.execPath, SCRIPT, 'run'];
    const cmd = opts.container ? ['unshare', '--pid', '--fork', '--kill-child', ...inner] : inner;
    const child = spawn('ip', ['netns', 'exec', this.ns, ...cmd], {
      env: this.env,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const exited = new Promise<number | string>((resolve) =>
      child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)),
    );
    const s = { child, stderr: () => stderr, exited };
    this.supervisors.push(s);
    return s;
  }

  /** A subcommand of the script, run to completion. */
  command(cmd: string, env: NodeJS.ProcessEnv = {}) {
    return run(process.execPath, [SCRIPT, cmd], { env: { ...this.env, ...env }, timeoutMs: 60_000 });
  }

  vsctl(...args: string[]): Promise<string> {
    return must('ovs-vsctl', [`--db=unix:${this.dbSock}`, '--timeout=10', ...args]);
  }

  pid(daemon: string): number {
    return Number(readFileSync(join(this.runDir, `${daemon}.pid`), 'utf8').trim());
  }

  /** Until db.sock serves and ovs-vswitchd answers (the script's own probe). */
  async waitUp(s: Supervisor): Promise<void> {
    await waitFor('the switch to answer', async () => {
      if (s.child.exitCode !== null) throw new Error(`the script exited: ${s.stderr()}`);
      return (await this.command('probe')).code === 0;
    });
  }

  /** Kills whatever is still running from this bed, removes the namespace and the directory. */
  async cleanup(): Promise<void> {
    for (const s of this.supervisors)
      if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
    for (const line of processesNaming(this.dir)) {
      try {
        process.kill(Number(line.split(' ')[0]), 'SIGKILL');
      } catch {}
    }
    await waitFor('processes of the bed to end', () => processesNaming(this.dir).length === 0, 5000);
    await run('ip', ['netns', 'del', this.ns]);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Runs `body` on a fresh bed and cleans up, pass or fail. */
async function withBed(bed: Bed, body: (b: Bed) => Promise<void>): Promise<void> {
  try {
    await bed.setup();
    await body(bed);
  } finally {
    await bed.cleanup();
  }
}

describe('deploy/ovs-switch.mjs on a real Open vSwitch', { skip }, () => {
  after(async () => {
    const namespaces = (await must('ip', ['netns', 'list'])).split('\n');
    for (const { dir, ns } of made) {
      assert.deepEqual(processesNaming(dir), [], `processes left from ${dir}`);
      assert.ok(!namespaces.some((l) => l.split(' ')[0] === ns), `namespace ${ns} left`);
      assert.ok(!existsSync(dir), `${dir} left`);
    }
  });

  test('datapath linux-bridge: the container idles, starting nothing and writing nothing; SIGTERM ends it with 0; probe, wait and load-module pass', async () => {
    await withBed(new Bed('linux-bridge'), async (b) => {
      const s = b.start();
      await waitFor('the idle log line', () => s.stderr().includes('idle until stopped'));
      await sleep(500);
      assert.equal(s.child.exitCode, null, 'still running: a container that exits is restarted forever');
      assert.deepEqual(childrenOf(s.child.pid as number), [], 'no daemon started');
      assert.deepEqual(readdirSync(b.runDir), []);
      assert.ok(!existsSync(b.dbDir), 'no database created');
      for (const cmd of ['probe', 'wait', 'load-module']) {
        const r = await b.command(cmd);
        assert.equal(r.code, 0, `${cmd}: ${r.stderr}`);
      }
      s.child.kill('SIGTERM');
      assert.equal(await s.exited, 0, s.stderr());
    });
  });

  test('datapath ovs (netdev): conf.db created, db.sock served, ovs-vsctl works; SIGTERM stops both daemons and keeps the database; a restart reuses it', async () => {
    await withBed(new Bed('ovs'), async (b) => {
      const s = b.start();
      await b.waitUp(s);
      assert.ok(existsSync(join(b.dbDir, 'conf.db')));
      assert.match(s.stderr(), /"msg":"database created"/);
      await b.vsctl('show');
      // Set before ovs-vswitchd starts; the agent clears it once its flows are in place.
      assert.equal(
        (await b.vsctl('get', 'Open_vSwitch', '.', 'other_config:flow-restore-wait')).trim(),
        '"true"',
      );
      const wait = await b.command('wait');
      assert.equal(wait.code, 0, wait.stderr);
      // The bridge as the agent creates it, and its OpenFlow socket where the agent looks (beside db.sock).
      await b.vsctl('add-br', 'br-test', '--', 'set', 'bridge', 'br-test', 'datapath_type=netdev');
      await waitFor('br-test.mgmt', () => existsSync(join(b.runDir, 'br-test.mgmt')));
      await must('ovs-ofctl', ['show', `unix:${join(b.runDir, 'br-test.mgmt')}`]);
      const daemons = [b.pid('ovsdb-server'), b.pid('ovs-vswitchd')];
      assert.deepEqual(
        childrenOf(s.child.pid as number).sort(),
        [...daemons].sort(),
        'both daemons are its children',
      );

      s.child.kill('SIGTERM');
      assert.equal(await s.exited, 0, s.stderr());
      assert.match(s.stderr(), /without --cleanup/);
      for (const pid of daemons) assert.ok(!alive(pid), `daemon ${pid} still running`);
      assert.ok(existsSync(join(b.dbDir, 'conf.db')), 'the database stays');

      const again = b.start();
      await b.waitUp(again);
      assert.match(again.stderr(), /"msg":"database reused"/);
      assert.deepEqual((await b.vsctl('list-br')).trim().split('\n'), ['br-test']);
      again.child.kill('SIGTERM');
      assert.equal(await again.exited, 0, again.stderr());
    });
  });

  test('a daemon that dies takes the container down (exit 1, the other daemon stopped); after a SIGKILL of everything, stale pidfiles and sockets do not stop the next start', async () => {
    await withBed(new Bed('ovs'), async (b) => {
      const s = b.start();
      await b.waitUp(s);
      await b.vsctl('add-br', 'br-test', '--', 'set', 'bridge', 'br-test', 'datapath_type=netdev');
      const vswitchd = b.pid('ovs-vswitchd');
      process.kill(b.pid('ovsdb-server'), 'SIGKILL');
      assert.equal(await s.exited, 1, s.stderr());
      assert.match(s.stderr(), /"msg":"daemon exited: stopping the other one/);
      assert.ok(!alive(vswitchd), 'ovs-vswitchd stopped');

      // The kubelet's restart.
      const second = b.start();
      await b.waitUp(second);
      assert.deepEqual((await b.vsctl('list-br')).trim().split('\n'), ['br-test']);
      second.child.kill('SIGTERM');
      assert.equal(await second.exited, 0, second.stderr());

      // The container killed outright, every process of it at once: pidfiles and sockets stay behind.
      const killed = b.start({ container: true });
      // Its pidfiles hold PIDs of its own namespace, which ovs-appctl (the probe) cannot check from
      // this one: up is when br-test's OpenFlow socket answers, which needs both daemons.
      await waitFor('br-test.mgmt to answer', async () => {
        if (killed.child.exitCode !== null) throw new Error(`the script exited: ${killed.stderr()}`);
        return (await run('ovs-ofctl', ['show', `unix:${join(b.runDir, 'br-test.mgmt')}`])).code === 0;
      });
      killed.child.kill('SIGKILL');
      await killed.exited;
      await waitFor('every process of the container to end', () => processesNaming(b.dir).length === 0);
      for (const f of ['ovsdb-server.pid', 'ovs-vswitchd.pid', 'db.sock'])
        assert.ok(existsSync(join(b.runDir, f)), `stale ${f} stayed`);

      const third = b.start();
      await b.waitUp(third);
      assert.deepEqual((await b.vsctl('list-br')).trim().split('\n'), ['br-test']);
      third.child.kill('SIGTERM');
      assert.equal(await third.exited, 0, third.stderr());
    });
  });

  test("a database of an older schema is converted to the image's schema, its rows kept", async () => {
    await withBed(new Bed('ovs'), async (b) => {
      // An "older" vswitch schema: one column fewer, a lower version, no checksum.
      const schema = JSON.parse(readFileSync(SCHEMA, 'utf8')) as {
        version: string;
        cksum?: string;
        tables: Record<string, { columns: Record<string, unknown> }>;
      };
      const current = schema.version;
      schema.version = '8.0.0';
      delete schema.cksum;
      delete schema.tables.Bridge?.columns.datapath_version;
      const oldSchema = join(b.dir, 'old.ovsschema');
      writeFileSync(oldSchema, JSON.stringify(schema));
      mkdirSync(b.dbDir);
      const db = join(b.dbDir, 'conf.db');
      await must('ovsdb-tool', ['create', db, oldSchema]);
      // A row written under the old schema, directly into the file.
      await must('ovsdb-tool', [
        'transact',
        db,
        JSON.stringify([
          'Open_vSwitch',
          { op: 'insert', table: 'Open_vSwitch', row: { external_ids: ['map', [['podwire-test', 'kept']]] } },
        ]),
      ]);

      const s = b.start();
      await b.waitUp(s);
      assert.match(
        s.stderr(),
        /"msg":"database converted to the image schema","db":"[^"]+","from":"8\.0\.0"/,
      );
      assert.equal((await must('ovsdb-tool', ['db-version', db])).trim(), current);
      assert.equal((await b.vsctl('get', 'Open_vSwitch', '.', 'external_ids:podwire-test')).trim(), 'kept');
      s.child.kill('SIGTERM');
      assert.equal(await s.exited, 0, s.stderr());
    });
  });

  test('load-module: with ovsDatapathType system and no module it fails naming the module and the netdev alternative; netdev skips it', {
    skip: existsSync('/sys/module/openvswitch') ? 'the openvswitch module is loaded on this machine' : false,
  }, async () => {
    const system = new Bed('ovs', 'system');
    const netdev = new Bed('ovs', 'netdev');
    try {
      // modprobe's root: an empty directory, so that this test never loads a module into this kernel.
      const r = await system.command('load-module', { PODWIRE_MODPROBE_ROOT: system.dir });
      assert.equal(r.code, 1, r.stderr);
      assert.match(
        r.stderr,
        /cannot load the openvswitch kernel module, which ovsDatapathType: system needs/,
      );
      assert.match(r.stderr, /modprobe: .*openvswitch/);
      assert.match(r.stderr, /ovsDatapathType: netdev/);
      const skipped = await netdev.command('load-module', { PODWIRE_MODPROBE_ROOT: netdev.dir });
      assert.equal(skipped.code, 0, skipped.stderr);
      assert.match(skipped.stderr, /not needed: skipped","datapath":"ovs","ovsDatapathType":"netdev"/);
    } finally {
      // No namespace was made: remove the directories only (cleanup's `ip netns del` of a missing
      // namespace is a harmless failure).
      await system.cleanup();
      await netdev.cleanup();
    }
  });
});
