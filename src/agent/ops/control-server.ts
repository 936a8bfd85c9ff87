/**
 * The agent's control socket, for the `podwire` CLI: separate from the CNI socket, beside it
 * (`control.sock` in the same directory), mode 0600. One JSON line in, one JSON line out:
 *   request:  {"method": "status", "params": {...}}
 *   response: {"ok": true, "result": ...} or {"ok": false, "error": {"code": "ERR_...", "message": "..."}}
 */
import { createServer, type Server, type Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { DecodeError, InvalidConfigError, PodwireError } from '../../base/errors.js';
import type { Logger } from '../log.js';
import { type BoundSocketFile, listenUnix, unlinkOwnSocket } from '../unix-listen.js';

export type ControlMethod = (params: Record<string, unknown>) => Promise<unknown>;

/** The control socket that belongs with a CNI socket path. */
export function controlSocketPath(cniSocket: string): string {
  return join(dirname(cniSocket), 'control.sock');
}

const MAX_REQUEST = 64 << 10;

export class ControlServer {
  readonly path: string;
  readonly #server: Server;
  #file: BoundSocketFile | undefined;
  readonly #methods: ReadonlyMap<string, ControlMethod>;
  readonly #log: Logger;

  constructor(path: string, methods: ReadonlyMap<string, ControlMethod>, log: Logger) {
    this.path = path;
    this.#methods = methods;
    this.#log = log;
    this.#server = createServer((sock) => this.#serve(sock));
  }

  async listen(): Promise<void> {
    this.#file = await listenUnix(this.#server, this.path, (err) =>
      this.#log.error('control socket error (serving on)', { err: err.message }),
    );
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    unlinkOwnSocket(this.#file);
  }

  #serve(sock: Socket): void {
    let buf = '';
    sock.setEncoding('utf8');
    sock.on('data', (chunk: string) => {
      buf += chunk;
      if (buf.length > MAX_REQUEST) {
        sock.end(
          `${JSON.stringify({ ok: false, error: { code: 'ERR_DECODE', message: 'request too large' } })}\n`,
        );
        return;
      }
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      const line = buf.slice(0, nl);
      buf = '';
      this.#answer(line).then(
        (out) => sock.end(`${JSON.stringify(out)}\n`),
        (err: unknown) => this.#log.error('control answer failed', { err: String(err) }),
      );
    });
    sock.on('error', (err) => this.#log.warn('control connection error', { err: err.message }));
  }

  async #answer(line: string): Promise<unknown> {
    try {
      let req: { method?: unknown; params?: unknown };
      try {
        req = JSON.parse(line) as { method?: unknown; params?: unknown };
      } catch (err) {
        throw new DecodeError('control request is not JSON', { cause: err });
      }
      const method = typeof req.method === 'string' ? this.#methods.get(req.method) : undefined;
      if (!method) throw new InvalidConfigError(`unknown control method ${JSON.stringify(req.method)}`);
      const params =
        req.params && typeof req.params === 'object' ? (req.params as Record<string, unknown>) : {};
      return { ok: true, result: await method(params) };
    } catch (err) {
      const code = err instanceof PodwireError ? err.code : 'ERR_INTERNAL';
      return { ok: false, error: { code, message: err instanceof Error ? err.message : String(err) } };
    }
  }
}
