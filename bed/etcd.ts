/**
 * A real etcd (Debian's /usr/bin/etcd, 3.4) for tests, inside a network namespace (I7): by default a
 * throwaway `pwt-*-etcd` namespace of its own, listening on its loopback, so ports never collide
 * with anything; or, for the multi-node test bed, inside a namespace the caller owns, on an address
 * of that namespace (e.g. the underlay bridge's).
 *
 * Clients in the test process reach a namespace-private etcd through `server.connect`, which creates
 * each TCP socket inside the namespace (kernel/netns.ts `inNetns`, synchronous, I1) and hands it to
 * Node: a socket stays in the namespace it was created in.
 *
 * Nothing stays behind, pass or fail: `cleanup()` stops etcd (SIGTERM, then SIGKILL), removes its
 * data directory and its own namespace; an exit hook does the same for servers a failing test did
 * not clean up; etcd runs under `setpriv --pdeathsig KILL`, so it dies even with a SIGKILLed test
 * process, and the namespace and directory such a process leaves (both carry its PID) are swept by
 * the next `start`.
 *
 * With `tls: true` etcd serves https with client certificates required (`--client-cert-auth`), from
 * a PKI made for it in its data directory (bed/pki.ts, removed with it); `enableAuth` turns on
 * etcd's users and roles. The test bed's own requests (health, `call`) use the PKI's client
 * certificate and, once auth is on, the root user.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import http from 'node:http';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { connect as tlsConnect } from 'node:tls';
import type { ConnectFn } from '../src/cluster/etcd-gateway.js';
import { AF_INET, AF_INET6, socket } from '../src/kernel/libc.js';
import { inNetns, NetnsHandle } from '../src/kernel/netns.js';
import { must, run } from './exec.js';
import { NETNS_DIR, netnsPath, uniqueName } from './namespaces.js';
import { makeTestPki, type TestPki } from './pki.js';

const ETCD = '/usr/bin/etcd';
/** linux/net.h: SOCK_STREAM (libc.ts exports only the datagram and raw types). */
const SOCK_STREAM = 1;

export interface EtcdOptions {
  /** Run inside this namespace (the caller owns it); default: a namespace of its own, removed at cleanup. */
  netns?: string;
  /** Client address inside the namespace; default 127.0.0.1. */
  host?: string;
  clientPort?: number;
  peerPort?: number;
  /** How long `start` waits for /health; default 15 s. */
  startTimeoutMs?: number;
  /** https with client certificates required, from a PKI made for this server (`pki`). */
  tls?: boolean;
  /** etcd's `--auth-token-ttl` (seconds; etcd's default 300): how long an unused auth token lives. */
  authTokenTtl?: number;
  /** etcd's `--max-request-bytes` (default 1.5 MiB): also the size above which it fragments watch responses. */
  maxRequestBytes?: number;
}

/** An etcd user `enableAuth` creates, with read-write permission on `prefix` (none: no role). */
export interface EtcdUser {
  name: string;
  password: string;
  prefix?: string;
}

const OWN_NETNS = /^pwt-(\d+)-[0-9a-f]+-etcd$/;
const OWN_DIR = /^podwire-etcd-(\d+)-/;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Whether every thread of `pid` is stopped (state T in /proc/PID/task/TID/stat); false once it is gone. */
function allStopped(pid: number): boolean {
  try {
    return readdirSync(`/proc/${pid}/task`).every((tid) => {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'T';
    });
  } catch {
    return false;
  }
}

let swept = false;

/** Removes the namespaces and directories of test processes that died without cleaning up. */
async function sweepDead(): Promise<void> {
  if (swept) return;
  swept = true;
  const netns = await readdir(NETNS_DIR).catch(() => [] as string[]);
  for (const name of netns) {
    const m = OWN_NETNS.exec(name);
    if (m && !alive(Number(m[1]))) await run('ip', ['netns', 'del', name]);
  }
  for (const name of await readdir(tmpdir())) {
    const m = OWN_DIR.exec(name);
    if (m && !alive(Number(m[1]))) await rm(join(tmpdir(), name), { recursive: true, force: true });
  }
}

/** Every server not yet cleaned up, for the exit hook. */
const live = new Set<EtcdServer>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const s of live) s.cleanupSync();
  });
}

export class EtcdServer {
  readonly netns: string;
  readonly host: string;
  readonly clientPort: number;
  /** `http://HOST:PORT` (`https://` with `tls`), valid inside `netns`. */
  readonly endpoint: string;
  readonly dir: string;
  /** The certificates, with `tls`. */
  readonly pki: TestPki | undefined;
  readonly #authTokenTtl: number | undefined;
  readonly #maxRequestBytes: number | undefined;
  /** Set by `enableAuth`: the bed's own requests authenticate as root. */
  #root: { name: string; password: string } | undefined;
  readonly #peerPort: number;
  readonly #ownNetns: boolean;
  readonly #startTimeoutMs: number;
  readonly #home: NetnsHandle;
  readonly #target: NetnsHandle;
  #child: ChildProcess | undefined;
  #log: string[] = [];
  #cleaned = false;

  private constructor(o: {
    netns: string;
    ownNetns: boolean;
    dir: string;
    home: NetnsHandle;
    target: NetnsHandle;
    opts: EtcdOptions;
    pki: TestPki | undefined;
  }) {
    this.netns = o.netns;
    this.#ownNetns = o.ownNetns;
    this.dir = o.dir;
    this.#home = o.home;
    this.#target = o.target;
    this.host = o.opts.host ?? '127.0.0.1';
    this.clientPort = o.opts.clientPort ?? 2379;
    this.#peerPort = o.opts.peerPort ?? 2380;
    this.#startTimeoutMs = o.opts.startTimeoutMs ?? 15_000;
    const h = this.host.includes(':') ? `[${this.host}]` : this.host;
    this.pki = o.pki;
    this.#authTokenTtl = o.opts.authTokenTtl;
    this.#maxRequestBytes = o.opts.maxRequestBytes;
    this.endpoint = `${o.pki ? 'https' : 'http'}://${h}:${this.clientPort}`;
  }

  /** Creates the namespace (unless given) and the data directory, starts etcd, waits until healthy. */
  static async start(opts: EtcdOptions = {}): Promise<EtcdServer> {
    installExitHook();
    await sweepDead();
    const ownNetns = opts.netns === undefined;
    const netns = opts.netns ?? uniqueName('etcd');
    let dir: string | undefined;
    const handles: NetnsHandle[] = [];
    try {
      if (ownNetns) {
        await must('ip', ['netns', 'add', netns]);
        await must('ip', ['-n', netns, 'link', 'set', 'lo', 'up']);
      }
      dir = await mkdtemp(join(tmpdir(), `podwire-etcd-${process.pid}-`));
      handles.push(NetnsHandle.current());
      handles.push(NetnsHandle.open(netnsPath(netns)));
      const [home, target] = handles as [NetnsHandle, NetnsHandle];
      const pki = opts.tls ? await makeTestPki(dir, [opts.host ?? '127.0.0.1']) : undefined;
      const server = new EtcdServer({ netns, ownNetns, dir, home, target, opts, pki });
      live.add(server);
      try {
        await server.restart();
      } catch (err) {
        await server.cleanup();
        throw err;
      }
      return server;
    } catch (err) {
      if (!handles.some((h) => h.closed)) {
        for (const h of handles) h.close();
        if (dir !== undefined) await rm(dir, { recursive: true, force: true });
        if (ownNetns) await run('ip', ['netns', 'del', netns]);
      }
      throw err;
    }
  }

  /** A connect function for `EtcdStore` clients in the test process: the socket is made inside the namespace. */
  readonly connect: ConnectFn = ({ host, port }) => {
    const family = host.includes(':') ? AF_INET6 : AF_INET;
    const fd = inNetns(this.#target, this.#home, () => socket(family, SOCK_STREAM, 0));
    const s = new Socket({ fd, readable: true, writable: true });
    s.connect(port, host);
    return s;
  };

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  get running(): boolean {
    return this.#child !== undefined;
  }

  /** Starts etcd on the same data directory (after `stop`) and waits until it is healthy. */
  async restart(): Promise<void> {
    if (this.#child !== undefined) throw new Error('etcd is already running');
    const peer = `http://${this.host.includes(':') ? `[${this.host}]` : this.host}:${this.#peerPort}`;
    // biome-ignore format: flag/value pairs
    const args = [
      'netns', 'exec', this.netns,
      'setpriv', '--pdeathsig', 'KILL', '--',
      ETCD,
      '--name', 'pwt',
      '--data-dir', join(this.dir, 'data'),
      '--listen-client-urls', this.endpoint,
      '--advertise-client-urls', this.endpoint,
      '--listen-peer-urls', peer,
      '--initial-advertise-peer-urls', peer,
      '--initial-cluster', `pwt=${peer}`,
      '--initial-cluster-state', 'new',
      '--heartbeat-interval', '50',
      '--election-timeout', '300',
      '--logger', 'zap',
      '--log-level', 'warn',
    ];
    if (this.pki) {
      // biome-ignore format: flag/value pairs
      args.push(
        '--cert-file', this.pki.serverCert,
        '--key-file', this.pki.serverKey,
        '--trusted-ca-file', this.pki.ca,
        '--client-cert-auth',
      );
    }
    if (this.#authTokenTtl !== undefined) args.push('--auth-token-ttl', String(this.#authTokenTtl));
    if (this.#maxRequestBytes !== undefined) args.push('--max-request-bytes', String(this.#maxRequestBytes));
    const child = spawn('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    this.#child = child;
    child.stderr?.on('data', (d: Buffer) => {
      this.#log.push(
        ...d
          .toString()
          .split('\n')
          .filter((l) => l !== ''),
      );
      if (this.#log.length > 40) this.#log = this.#log.slice(-40);
    });
    child.on('exit', () => {
      if (this.#child === child) this.#child = undefined;
    });
    const deadline = Date.now() + this.#startTimeoutMs;
    for (;;) {
      if (this.#child !== child) throw new Error(`etcd exited during start:\n${this.logTail()}`);
      if (await this.#healthy()) return;
      if (Date.now() > deadline) {
        await this.stop();
        throw new Error(`etcd not healthy after ${this.#startTimeoutMs} ms:\n${this.logTail()}`);
      }
      await sleep(50);
    }
  }

  /** SIGTERM, then SIGKILL after 3 s; resolves when the process is gone. The data directory stays. */
  async stop(): Promise<void> {
    const child = this.#child;
    if (child === undefined) return;
    const gone = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once('exit', () => resolve());
    });
    child.kill('SIGCONT'); // a paused etcd cannot act on SIGTERM
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
    await gone;
    clearTimeout(timer);
    if (this.#child === child) this.#child = undefined;
  }

  /**
   * SIGSTOP: etcd keeps its sockets open but answers nothing, like a hung or partitioned server.
   * Returns once every thread of etcd is stopped: a thread takes a moment to reach the stop (one in a
   * system call finishes it first), and on a busy machine etcd was seen to answer a request sent right
   * after the signal (2 in 200).
   */
  pause(): void {
    const child = this.#child;
    if (child?.pid === undefined) return;
    child.kill('SIGSTOP');
    const deadline = Date.now() + 2000;
    while (!allStopped(child.pid)) {
      if (Date.now() > deadline) throw new Error(`etcd ${child.pid}: not stopped 2 s after SIGSTOP`);
    }
  }

  resume(): void {
    this.#child?.kill('SIGCONT');
  }

  /** POSTs to the JSON gateway from inside the namespace (e.g. `/v3/kv/compaction`); as root once auth is on. */
  async call(path: string, body: unknown): Promise<unknown> {
    const token = this.#root ? await this.#authenticate(this.#root) : undefined;
    return this.#post(path, body, token);
  }

  /**
   * Turns on etcd's authentication: a root user, then each user with a role of its own that may
   * read and write its `prefix`. Equivalent to: `etcdctl user add`, `role add`, `role
   * grant-permission --prefix`, `user grant-role`, `auth enable`.
   */
  async enableAuth(users: EtcdUser[]): Promise<void> {
    const root = { name: 'root', password: `root-${process.pid}` };
    await this.#post('/v3/auth/user/add', { name: root.name, password: root.password });
    await this.#post('/v3/auth/user/grant', { user: root.name, role: 'root' });
    for (const u of users) {
      await this.#post('/v3/auth/user/add', { name: u.name, password: u.password });
      if (u.prefix === undefined) continue;
      const key = Buffer.from(u.prefix);
      const end = Buffer.from(key);
      end[end.length - 1] = (end[end.length - 1] as number) + 1;
      await this.#post('/v3/auth/role/add', { name: u.name });
      await this.#post('/v3/auth/role/grant', {
        name: u.name,
        perm: { permType: 'READWRITE', key: key.toString('base64'), range_end: end.toString('base64') },
      });
      await this.#post('/v3/auth/user/grant', { user: u.name, role: u.name });
    }
    await this.#post('/v3/auth/enable', {});
    this.#root = root;
  }

  async #authenticate(user: { name: string; password: string }): Promise<string> {
    const r = (await this.#post('/v3/auth/authenticate', user)) as { token?: string };
    if (typeof r.token !== 'string') throw new Error('etcd /v3/auth/authenticate: no token');
    return r.token;
  }

  async #post(path: string, body: unknown, token?: string): Promise<unknown> {
    const r = await this.#request('POST', path, JSON.stringify(body), token);
    if (r.status !== 200) throw new Error(`etcd ${path}: HTTP ${r.status}: ${r.body}`);
    return JSON.parse(r.body);
  }

  logTail(): string {
    return this.#log.join('\n');
  }

  /** Stops etcd, removes its directory and (if its own) its namespace. Idempotent. */
  async cleanup(): Promise<void> {
    if (this.#cleaned) return;
    this.#cleaned = true;
    live.delete(this);
    try {
      await this.stop();
    } finally {
      this.#home.close();
      this.#target.close();
      await rm(this.dir, { recursive: true, force: true });
      if (this.#ownNetns) await run('ip', ['netns', 'del', this.netns]);
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.cleanup();
  }

  /** For the exit hook only: no event loop left, so everything is synchronous. */
  cleanupSync(): void {
    if (this.#cleaned) return;
    this.#cleaned = true;
    this.#child?.kill('SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
    if (this.#ownNetns) spawnSync('ip', ['netns', 'del', this.netns]);
  }

  async #healthy(): Promise<boolean> {
    try {
      const r = await this.#request('GET', '/health', undefined);
      return r.status === 200 && (JSON.parse(r.body) as { health?: string }).health === 'true';
    } catch {
      return false; // not listening yet: the caller polls until its deadline
    }
  }

  #request(
    method: string,
    path: string,
    body: string | undefined,
    token?: string,
  ): Promise<{ status: number; body: string }> {
    const open = (): Socket => {
      const socket = this.connect({ host: this.host, port: this.clientPort });
      if (!this.pki) return socket;
      return tlsConnect({
        socket,
        host: this.host,
        ca: readFileSync(this.pki.ca),
        cert: readFileSync(this.pki.clientCert),
        key: readFileSync(this.pki.clientKey),
      });
    };
    return new Promise((resolve, reject) => {
      const req = http.request({
        host: this.host,
        port: this.clientPort,
        method,
        path,
        ...(token === undefined ? {} : { headers: { authorization: token } }),
        createConnection: open,
        signal: AbortSignal.timeout(2000),
      });
      req.on('response', (res) => {
        let text = '';
        res.on('data', (d: Buffer) => {
          text += d.toString();
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
  }
}
