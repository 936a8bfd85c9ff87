#!/usr/bin/env node
/**
 * Open vSwitch for the OVS datapath, in the DaemonSet's `ovs` container, and the kernel module step
 * of its `ovs-module` init container. Whether it does anything is decided by the agent's own
 * configuration (the file install-cni rendered from the ConfigMap, read with the agent's parser):
 * `datapath: ovs` runs the switch; `datapath: linux-bridge` leaves OVS alone. One key selects it.
 *
 *   node ovs-switch.mjs run           the switch, supervised (the `ovs` container's command):
 *       - datapath linux-bridge: starts nothing, waits idle until SIGTERM, exits 0 (a container that
 *         exited would be restarted by the kubelet forever);
 *       - datapath ovs: creates DB_DIR/conf.db with ovsdb-tool if missing, converts it when the
 *         image's schema is newer, starts ovsdb-server (--remote=punix:RUN_DIR/db.sock) and
 *         ovs-vswitchd in the foreground (with other_config:flow-restore-wait=true, which the agent
 *         clears once its flows are in place: a restarted switch keeps the kernel's flows until then),
 *         both children of this process. When either dies, the other
 *         is stopped and this process exits 1: the kubelet restarts the container. On SIGTERM both
 *         are stopped with `ovs-appctl exit`, WITHOUT --cleanup: the kernel datapath, its ports and
 *         the database stay, so pods keep forwarding on established kernel flows while the container
 *         is away. Exit 0.
 *   node ovs-switch.mjs probe         liveness/readiness: exit 0 when idle, or when ovs-vswitchd
 *                                     answers `version` and ovsdb-server lists Open_vSwitch
 *   node ovs-switch.mjs wait          the `ovs` container's postStart hook: waits (up to
 *                                     PODWIRE_OVS_WAIT_S) until `probe` passes, so the kubelet starts
 *                                     the agent container, which comes after it, once the switch is up
 *   node ovs-switch.mjs load-module   the init container: `modprobe openvswitch` when datapath is ovs
 *                                     and ovsDatapathType is system; skipped otherwise. A missing module
 *                                     is an error that says so (the kubelet retries the pod)
 *
 * RUN_DIR is the directory of the agent's `ovsdb` socket (default unix:/run/openvswitch/db.sock):
 * ovs-vswitchd puts BRIDGE.mgmt there, where the agent looks for it. Logs: one JSON line per event of
 * this script on stderr; the daemons log to the console (stderr) too, not to files.
 *
 * Environment (defaults are the DaemonSet's paths):
 *   PODWIRE_CONFIG          the agent's rendered configuration    /etc/podwire/agent.yaml
 *   PODWIRE_OVS_DB_DIR      where conf.db lives (a hostPath)       /var/lib/openvswitch
 *   PODWIRE_OVS_SCHEMA      the schema the image's OVS speaks      /usr/share/openvswitch/vswitch.ovsschema
 *   PODWIRE_OVS_WAIT_S      how long `wait` waits                  60
 *   PODWIRE_MODPROBE_ROOT   modprobe's root (-d): the modules are ROOT/lib/modules/`uname -r`   /
 *                           (the container mounts the host's /lib/modules; tests point it elsewhere)
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseAgentConfig } from '../dist/src/agent/config.js';

const env = (name, fallback) => process.env[name] || fallback;
/** How long each daemon gets to exit after `ovs-appctl exit` before SIGTERM, then SIGKILL. */
const STOP_MS = 10_000;
const APPCTL_TIMEOUT_S = 5;

function log(level, msg, fields = {}) {
  process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields })}\n`);
}

class OvsError extends Error {}

/** What this script needs of the agent's configuration, and the paths derived from it. */
function settings() {
  const configPath = env('PODWIRE_CONFIG', '/etc/podwire/agent.yaml');
  const config = parseAgentConfig(readFileSync(configPath, 'utf8'));
  // parseAgentConfig accepts only unix:ABSOLUTE-PATH.
  const dbSock = config.ovsdb.slice('unix:'.length);
  const runDir = dirname(dbSock);
  const dbDir = env('PODWIRE_OVS_DB_DIR', '/var/lib/openvswitch');
  return {
    configPath,
    datapath: config.datapath,
    datapathType: config.ovsDatapathType,
    dbSock,
    runDir,
    dbDir,
    db: join(dbDir, 'conf.db'),
    schema: env('PODWIRE_OVS_SCHEMA', '/usr/share/openvswitch/vswitch.ovsschema'),
    // The OVS tools find pidfiles and control sockets through these.
    ovsEnv: { ...process.env, OVS_RUNDIR: runDir, OVS_DBDIR: dbDir, OVS_LOGDIR: runDir },
  };
}

/** Runs a tool to completion; throws OvsError with its stderr unless it exits 0. Returns stdout. */
function tool(s, cmd, args, { timeoutMs = 30_000 } = {}) {
  const r = spawnSync(cmd, args, { env: s.ovsEnv, encoding: 'utf8', timeout: timeoutMs });
  if (r.error) throw new OvsError(`${cmd} ${args.join(' ')}: ${r.error.message}`);
  if (r.status !== 0) {
    throw new OvsError(`${cmd} ${args.join(' ')}: exit ${r.status ?? r.signal}: ${(r.stderr ?? '').trim()}`);
  }
  return r.stdout;
}

/** conf.db on the hostPath: created if missing, converted if the image's schema is newer. */
function prepareDatabase(s) {
  mkdirSync(s.dbDir, { recursive: true });
  mkdirSync(s.runDir, { recursive: true });
  if (!existsSync(s.db)) {
    tool(s, 'ovsdb-tool', ['create', s.db, s.schema]);
    log('info', 'database created', { db: s.db, version: tool(s, 'ovsdb-tool', ['db-version', s.db]).trim() });
    return;
  }
  const needs = tool(s, 'ovsdb-tool', ['needs-conversion', s.db, s.schema]).trim();
  if (needs === 'yes') {
    const from = tool(s, 'ovsdb-tool', ['db-version', s.db]).trim();
    tool(s, 'ovsdb-tool', ['convert', s.db, s.schema]);
    const to = tool(s, 'ovsdb-tool', ['db-version', s.db]).trim();
    log('info', 'database converted to the image schema', { db: s.db, from, to });
  } else {
    log('info', 'database reused', { db: s.db });
  }
}

/** Resolves once `path` accepts a unix-socket connection; rejects when `alive()` turns false or on timeout. */
async function waitForSocket(path, alive, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise((resolve) => {
      const sock = connect(path);
      sock.once('connect', () => {
        sock.destroy();
        resolve(true);
      });
      sock.once('error', () => resolve(false));
    });
    if (ok) return;
    if (!alive()) throw new OvsError(`exited before ${path} accepted connections`);
    if (Date.now() > deadline) throw new OvsError(`${path} did not accept connections in ${timeoutMs} ms`);
    await sleep(20);
  }
}

/** The `probe` check: ovs-vswitchd answers on its control socket and ovsdb-server serves Open_vSwitch. */
function checkSwitch(s) {
  tool(s, 'ovs-appctl', [`--timeout=${APPCTL_TIMEOUT_S}`, '-t', 'ovs-vswitchd', 'version']);
  const dbs = tool(s, 'ovsdb-client', [`--timeout=${APPCTL_TIMEOUT_S}`, 'list-dbs', `unix:${s.dbSock}`]);
  if (!dbs.split('\n').includes('Open_vSwitch')) throw new OvsError(`ovsdb-server does not serve Open_vSwitch`);
}

/** Waits for SIGTERM or SIGINT; resolves with its name. */
function termination() {
  return new Promise((resolve) => {
    for (const sig of ['SIGTERM', 'SIGINT']) process.once(sig, () => resolve(sig));
  });
}

/** A daemon as a child of this process, with a promise of its exit. */
function startDaemon(s, name, args) {
  const child = spawn(name, args, { env: s.ovsEnv, stdio: ['ignore', 'inherit', 'inherit'] });
  const exited = new Promise((resolve) => {
    child.once('error', (err) => resolve({ name, code: null, signal: null, error: err.message }));
    child.once('exit', (code, signal) => resolve({ name, code, signal }));
  });
  log('info', 'started', { daemon: name, pid: child.pid });
  return { name, child, exited, running: () => child.exitCode === null && child.signalCode === null };
}

/**
 * Stops a daemon without cleanup: `ovs-appctl exit` (the datapath and its flows stay), then SIGTERM
 * and SIGKILL if it does not go.
 */
async function stopDaemon(s, d) {
  if (!d.running()) return;
  const r = spawnSync('ovs-appctl', [`--timeout=${APPCTL_TIMEOUT_S}`, '-t', d.name, 'exit'], {
    env: s.ovsEnv,
    encoding: 'utf8',
  });
  if (r.status !== 0) log('warn', 'ovs-appctl exit failed', { daemon: d.name, stderr: (r.stderr ?? '').trim() });
  for (const signal of ['SIGTERM', 'SIGKILL']) {
    const timer = new Promise((resolve) => setTimeout(resolve, STOP_MS, 'timeout'));
    if ((await Promise.race([d.exited, timer])) !== 'timeout') return;
    log('warn', 'daemon did not exit, signalling', { daemon: d.name, signal });
    d.child.kill(signal);
  }
  await d.exited;
}

async function runSwitch() {
  const s = settings();
  const stop = termination();
  if (s.datapath !== 'ovs') {
    log('info', 'datapath is not ovs: Open vSwitch is not started, idle until stopped', {
      datapath: s.datapath,
      config: s.configPath,
    });
    const keepAlive = setInterval(() => undefined, 1 << 30);
    log('info', 'stopping', { signal: await stop });
    clearInterval(keepAlive);
    return 0;
  }
  prepareDatabase(s);
  const daemons = [];
  let stopping = false;
  const stopAll = async () => {
    // ovs-vswitchd first: it is ovsdb-server's client.
    for (const d of [...daemons].reverse()) await stopDaemon(s, d);
  };
  try {
    const db = startDaemon(s, 'ovsdb-server', [
      s.db,
      `--remote=punix:${s.dbSock}`,
      `--pidfile=${join(s.runDir, 'ovsdb-server.pid')}`,
      '-vconsole:info',
      '-vsyslog:off',
    ]);
    daemons.push(db);
    await Promise.race([
      waitForSocket(s.dbSock, db.running),
      db.exited.then((e) => {
        throw new OvsError(`ovsdb-server exited (${e.error ?? e.code ?? e.signal}) before serving ${s.dbSock}`);
      }),
    ]);
    // The root row, if the database is new; a no-op otherwise.
    tool(s, 'ovs-vsctl', [`--db=unix:${s.dbSock}`, '--no-wait', 'init']);
    // A restarted ovs-vswitchd keeps the kernel datapath's flows (the pods keep forwarding) and
    // handles no new packet until the agent has its flows back and clears the flag.
    tool(s, 'ovs-vsctl', [
      `--db=unix:${s.dbSock}`,
      '--no-wait',
      'set',
      'Open_vSwitch',
      '.',
      'other_config:flow-restore-wait=true',
    ]);
    const vswitchd = startDaemon(s, 'ovs-vswitchd', [
      `unix:${s.dbSock}`,
      `--pidfile=${join(s.runDir, 'ovs-vswitchd.pid')}`,
      '-vconsole:info',
      '-vsyslog:off',
    ]);
    daemons.push(vswitchd);
    log('info', 'Open vSwitch running', {
      db: s.db,
      ovsdb: `unix:${s.dbSock}`,
      runDir: s.runDir,
      datapathType: s.datapathType,
    });
    const first = await Promise.race([stop, db.exited, vswitchd.exited]);
    stopping = true;
    if (typeof first === 'string') {
      log('info', 'stopping: ovs-appctl exit, without --cleanup (the datapath stays)', { signal: first });
      await stopAll();
      return 0;
    }
    log('error', 'daemon exited: stopping the other one; the kubelet restarts the container', {
      daemon: first.name,
      code: first.code,
      signal: first.signal,
      ...(first.error ? { error: first.error } : {}),
    });
    await stopAll();
    return 1;
  } catch (err) {
    if (!stopping) await stopAll();
    throw err;
  }
}

async function probe() {
  const s = settings();
  if (s.datapath !== 'ovs') return 0;
  checkSwitch(s);
  return 0;
}

async function waitReady() {
  const s = settings();
  if (s.datapath !== 'ovs') return 0;
  const deadline = Date.now() + Number(env('PODWIRE_OVS_WAIT_S', '60')) * 1000;
  for (;;) {
    try {
      checkSwitch(s);
      log('info', 'Open vSwitch answers', { ovsdb: `unix:${s.dbSock}` });
      return 0;
    } catch (err) {
      if (Date.now() > deadline) throw err;
    }
    await sleep(200);
  }
}

function loadModule() {
  const s = settings();
  if (s.datapath !== 'ovs' || s.datapathType !== 'system') {
    log('info', 'openvswitch kernel module not needed: skipped', {
      datapath: s.datapath,
      ...(s.datapath === 'ovs' ? { ovsDatapathType: s.datapathType } : {}),
    });
    return 0;
  }
  if (existsSync('/sys/module/openvswitch')) {
    log('info', 'openvswitch kernel module already loaded');
    return 0;
  }
  const root = env('PODWIRE_MODPROBE_ROOT', '/');
  const r = spawnSync('modprobe', ['-d', root, 'openvswitch'], { encoding: 'utf8', timeout: 30_000 });
  if (r.status !== 0) {
    const why = r.error ? r.error.message : (r.stderr ?? '').trim();
    throw new OvsError(
      `cannot load the openvswitch kernel module, which ovsDatapathType: system needs (modprobe: ${why}). ` +
        "Install the node kernel's openvswitch module (e.g. linux-modules-extra on Ubuntu), " +
        'or choose the userspace datapath with ovsDatapathType: netdev',
    );
  }
  log('info', 'openvswitch kernel module loaded');
  return 0;
}

const commands = { run: runSwitch, probe, wait: waitReady, 'load-module': loadModule };
const name = process.argv[2] ?? 'run';
const command = commands[name];
if (command === undefined) {
  log('error', `unknown command ${name}: one of ${Object.keys(commands).join(', ')}`);
  process.exitCode = 2;
} else {
  Promise.resolve()
    .then(command)
    .then(
      (code) => {
        process.exitCode = code;
        // The signal listeners must not keep an idle or stopped supervisor alive.
        process.exit();
      },
      (err) => {
        log('error', `${name} failed`, { error: err instanceof Error ? err.message : String(err), code: err?.code });
        process.exit(1);
      },
    );
}
