/**
 * ovs-vswitchd's control socket ("unixctl"): JSON-RPC 1.0 over a Unix socket, what `ovs-appctl`
 * speaks. One connection per command, as ovs-appctl makes: `{"id":0,"method":M,"params":[...]}` in,
 * `{"id":0,"result":TEXT,"error":null}` (or an error text) out. The datapath uses it for what neither
 * OpenFlow nor OVSDB can ask: `revalidator/purge` (decision 52).
 */
import { existsSync, readFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { DatapathError } from '../../base/errors.js';
import { JsonStreamSplitter } from './json-stream.js';

/** How long one command may take by default, connection included. */
export const UNIXCTL_TIMEOUT_MS = 5000;

/** How long a purge of the datapath's flow cache may take (ovs-vswitchd answers once it is done). */
const PURGE_TIMEOUT_MS = 30_000;

/**
 * Equivalent to: `ovs-appctl revalidator/purge`: every flow ovs-vswitchd has cached in the datapath
 * deleted, so the next packet of each is judged by the tables as they are now (decision 52). On
 * `socket` when given, else on the ovs-vswitchd of `runDir` (vswitchdCommand). Long on a node with
 * many cached flows: ovs-vswitchd's main thread deletes them before it answers.
 */
export async function purgeDatapathCache(where: {
  socket?: string | undefined;
  runDir: string;
}): Promise<void> {
  if (where.socket) await unixctl(where.socket, 'revalidator/purge', [], PURGE_TIMEOUT_MS);
  else await vswitchdCommand(where.runDir, 'revalidator/purge', [], PURGE_TIMEOUT_MS);
}

/**
 * The control socket of the ovs-vswitchd whose run directory is `runDir`: `ovs-vswitchd.ctl` there
 * when it was started with that name (`--unixctl`), else its default, `ovs-vswitchd.PID.ctl`, with
 * the PID from its pidfile. Read at each use: a restarted ovs-vswitchd has another PID.
 */
export function vswitchdControlSocket(runDir: string): string {
  const named = join(runDir, 'ovs-vswitchd.ctl');
  if (existsSync(named)) return named;
  return pidControlSocket(runDir, named);
}

/**
 * Runs `method` on the ovs-vswitchd of `runDir`: on `ovs-vswitchd.ctl` when it is there, and when that
 * one refuses (a socket left by a daemon that died), on the one its pidfile names.
 */
export async function vswitchdCommand(
  runDir: string,
  method: string,
  params: readonly string[] = [],
  timeoutMs = UNIXCTL_TIMEOUT_MS,
): Promise<string> {
  const first = vswitchdControlSocket(runDir);
  try {
    return await unixctl(first, method, params, timeoutMs);
  } catch (err) {
    const code = ((err as Error).cause as NodeJS.ErrnoException | undefined)?.code;
    if (code !== 'ECONNREFUSED' && code !== 'ENOENT') throw err;
    let other: string;
    try {
      other = pidControlSocket(runDir, first);
    } catch {
      throw err;
    }
    if (other === first) throw err;
    return await unixctl(other, method, params, timeoutMs);
  }
}

/** `ovs-vswitchd.PID.ctl` from the pidfile; `named`: the other candidate, for the error. */
function pidControlSocket(runDir: string, named: string): string {
  const pidfile = join(runDir, 'ovs-vswitchd.pid');
  let pid: string;
  try {
    pid = readFileSync(pidfile, 'utf8').trim();
  } catch (err) {
    throw new DatapathError(`ovs-vswitchd's control socket: neither ${named} nor a pidfile ${pidfile}`, {
      cause: err,
    });
  }
  if (!/^[1-9][0-9]{0,9}$/.test(pid))
    throw new DatapathError(`ovs-vswitchd's pidfile ${pidfile} holds no PID`);
  return join(runDir, `ovs-vswitchd.${pid}.ctl`);
}

/**
 * Runs one command on the control socket at `path`; resolves with its output text. Equivalent to:
 * `ovs-appctl --target=PATH METHOD PARAMS...`.
 */
export function unixctl(
  path: string,
  method: string,
  params: readonly string[] = [],
  timeoutMs = UNIXCTL_TIMEOUT_MS,
): Promise<string> {
  const what = `ovs-appctl ${[method, ...params].join(' ')}`;
  return new Promise<string>((resolve, reject) => {
    const splitter = new JsonStreamSplitter();
    const sock = createConnection({ path });
    let settled = false;
    const finish = (err: Error | undefined, text?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err);
      else resolve(text ?? '');
    };
    const timer = setTimeout(
      () => finish(new DatapathError(`${what}: no answer from ${path} within ${timeoutMs} ms`)),
      timeoutMs,
    );
    sock.on('error', (err) => finish(new DatapathError(`${what}: ${path}: ${err.message}`, { cause: err })));
    sock.on('close', () => finish(new DatapathError(`${what}: ${path} closed without an answer`)));
    sock.on('data', (chunk: Buffer) => {
      let messages: unknown[];
      try {
        messages = splitter.push(chunk);
      } catch (err) {
        finish(new DatapathError(`${what}: ${(err as Error).message}`, { cause: err }));
        return;
      }
      for (const m of messages) {
        const reply = m as { id?: unknown; result?: unknown; error?: unknown };
        if (reply.id !== 0) continue; // not the answer to this command (ovs-vswitchd sends no others)
        if (reply.error !== null && reply.error !== undefined)
          finish(new DatapathError(`${what}: ${String(reply.error).trim()}`));
        else finish(undefined, typeof reply.result === 'string' ? reply.result : '');
        return;
      }
    });
    sock.write(JSON.stringify({ id: 0, method, params }));
  });
}
