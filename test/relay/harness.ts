/**
 * What the relay tests share: the relay binary (built from relay/), a fake agent on a unix socket that
 * records each request frame and sends a scripted answer, a runner that gives the relay exactly the
 * environment and stdin a test chooses, and the CNI environment and config most tests send.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
/** The repository root: the nearest ancestor of this file that holds relay/Makefile. */
export function findRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'relay', 'Makefile'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('relay/Makefile not found above the test file');
    dir = up;
  }
  return dir;
}

export const ROOT = findRoot();
export const RELAY = join(ROOT, 'relay', 'podwire-cni');
export const STDIN_MAX = 1 << 20;
export const HAVE_CC = spawnSync('cc', ['--version'], { stdio: 'ignore' }).status === 0;

/** What the fake agent does with a connection. */
export type Behaviour =
  | { kind: 'answer'; status: number; stdout: Buffer }
  | { kind: 'hang-up-at-once' }
  | { kind: 'hang-up-after-request' }
  /** Reads the request, never answers. */
  | { kind: 'silent' }
  /** Never reads: the relay's sends block once the socket buffers are full. */
  | { kind: 'deaf' }
  /**
   * Answers on the first bytes and closes with the rest of the request unread, as the agent did with
   * a request over its size limit: the relay's send fails (EPIPE or ECONNRESET) after the answer.
   */
  | { kind: 'answer-early'; status: number; stdout: Buffer };

export interface FakeAgent {
  /** Every complete request frame received, in order. */
  requests: Buffer[];
  connections: number;
  errors: Error[];
}

/** A temporary directory removed when the test ends, pass or fail. */
export function tempDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'podwire-relay-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export async function startAgent(t: TestContext, path: string, behaviour: Behaviour): Promise<FakeAgent> {
  const agent: FakeAgent = { requests: [], connections: 0, errors: [] };
  // allowHalfOpen: the relay shuts down its write side first and still reads the answer.
  const open = new Set<Socket>();
  const server = createServer({ allowHalfOpen: true, pauseOnConnect: behaviour.kind === 'deaf' }, (sock) => {
    agent.connections++;
    open.add(sock);
    sock.on('close', () => open.delete(sock));
    sock.on('error', (err) => agent.errors.push(err));
    if (behaviour.kind === 'hang-up-at-once') {
      sock.destroy();
      return;
    }
    if (behaviour.kind === 'answer-early') {
      sock.once('data', () => {
        sock.end(Buffer.concat([Buffer.from([behaviour.status]), behaviour.stdout]));
        sock.once('finish', () => sock.destroy());
      });
      return;
    }
    const chunks: Buffer[] = [];
    sock.on('data', (chunk: Buffer) => chunks.push(chunk));
    sock.on('end', () => {
      agent.requests.push(Buffer.concat(chunks));
      if (behaviour.kind === 'answer') {
        sock.end(Buffer.concat([Buffer.from([behaviour.status]), behaviour.stdout]));
      } else if (behaviour.kind === 'hang-up-after-request') {
        sock.end();
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => resolve());
  });
  t.after(async () => {
    // close() waits for open connections; a silent or deaf agent's must be cut first.
    for (const sock of open) sock.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return agent;
}

export interface RelayRun {
  status: number | null;
  stdout: Buffer;
  stderr: string;
}

/**
 * Runs the relay with exactly `env` as its environment and `stdin` as its input. `raw` adds variables
 * whose values are bytes, not text (invalid UTF-8 cannot go through a JS string): a shell exports
 * them with printf and then execs the relay.
 */
export function runRelay(
  env: Record<string, string>,
  stdin: Buffer | string,
  relay = RELAY,
  opts: { cwd?: string; raw?: Record<string, Buffer> } = {},
): Promise<RelayRun> {
  return new Promise((resolve, reject) => {
    const raw = Object.entries(opts.raw ?? {});
    const octal = (b: Buffer) => [...b].map((c) => `\\${c.toString(8).padStart(3, '0')}`).join('');
    const script = `${raw.map(([k, v]) => `export ${k}="$(printf '${octal(v)}')"; `).join('')}exec "$0"`;
    const [file, args] = raw.length > 0 ? ['/bin/sh', ['-c', script, relay]] : [relay, []];
    const child = spawn(file, args, { env, cwd: opts.cwd, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    child.stdin.on('error', reject);
    child.on('error', reject);
    child.on('close', (status) =>
      resolve({ status, stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString() }),
    );
    child.stdin.end(stdin);
  });
}

/** Splits a request frame into its environment entries and the stdin bytes. */
export function parseFrame(frame: Buffer): { env: string[]; stdin: Buffer } {
  assert.ok(frame.length >= 4, `frame of ${frame.length} bytes has no length prefix`);
  const n = frame.readUInt32BE(0);
  assert.ok(4 + n <= frame.length, `env block of ${n} bytes overruns the ${frame.length}-byte frame`);
  const block = frame.subarray(4, 4 + n).toString('utf8');
  const env = block === '' ? [] : block.split('\0');
  if (env.length > 0) assert.equal(env.pop(), '', 'every entry ends with a NUL');
  return { env, stdin: frame.subarray(4 + n) };
}

export interface CniError {
  cniVersion: string;
  code: number;
  msg: string;
}

export function parseError(run: RelayRun): CniError {
  assert.equal(run.status, 1, `relay exit status (stderr: ${run.stderr})`);
  return JSON.parse(run.stdout.toString('utf8')) as CniError;
}

export const CNI_ENV = {
  CNI_COMMAND: 'ADD',
  CNI_CONTAINERID: 'b4a2f1c0de',
  CNI_NETNS: '/var/run/netns/cni-1234',
  CNI_IFNAME: 'eth0',
  CNI_PATH: '/opt/cni/bin:/usr/lib/cni',
  CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0',
  CNI_EMPTY: '',
  CNI_UTF8: 'héllo=wörld',
};
export const OTHER_ENV = {
  PATH: '/usr/bin:/bin',
  HOME: '/root',
  CNIX: 'no',
  cni_lower: 'no',
  XCNI_FOO: 'no',
};

export function config(socket: string | undefined, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    cniVersion: '1.0.0',
    name: 'podwire',
    type: 'podwire-cni',
    // A nested "socket" that the relay must not take for the top-level one.
    ipam: { type: 'host-local', socket: '/nested/must/not/be/used', ranges: [[{ subnet: '10.244.1.0/24' }]] },
    note: 'escapes \\ " \n \u00e9 and a fake key: "socket": "/wrong"',
    ...(socket === undefined ? {} : { socket }),
    ...extra,
  });
}

/** Builds relay/ (the before hook of every relay suite): make's output is the failure message. */
export function buildRelay(): void {
  const make = spawnSync('make', ['-C', join(ROOT, 'relay')], { encoding: 'utf8' });
  assert.equal(make.status, 0, `make -C relay failed:\n${make.stdout}${make.stderr}`);
}
