/** The CLI's side of the agent's control socket (see src/agent/control-server.ts). */
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import { DEFAULT_CONFIG, loadAgentConfig } from '../agent/config.js';
import { controlSocketPath } from '../agent/ops/control-server.js';
import { DecodeError, InternalError, InvalidConfigError, IoError, TryAgainError } from '../base/errors.js';
import type { CliArgs } from './args.js';

export const DEFAULT_CONFIG_PATH = '/etc/podwire/agent.yaml';

/** The control socket: `--socket`, else beside the CNI socket of `--config` (or the default config). */
export function resolveControlSocket(args: CliArgs): string {
  if (args.socket) return args.socket;
  const configPath = args.config ?? (existsSync(DEFAULT_CONFIG_PATH) ? DEFAULT_CONFIG_PATH : undefined);
  const cniSocket = configPath ? loadAgentConfig(configPath).socket : DEFAULT_CONFIG.socket;
  return controlSocketPath(cniSocket);
}

/** Calls one control method; explains what is wrong when the agent is not running. */
export function callAgent(
  path: string,
  method: string,
  params: Record<string, unknown> = {},
): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const sock = connect(path);
    let buf = '';
    sock.setEncoding('utf8');
    sock.setTimeout(30_000, () => sock.destroy(new Error(`no answer within 30 s`)));
    sock.on('connect', () => sock.write(`${JSON.stringify({ method, params })}\n`));
    sock.on('data', (d: string) => {
      buf += d;
    });
    sock.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT' || err.code === 'ECONNREFUSED') {
        reject(
          new TryAgainError(
            `the podwire agent is not running (nothing listens on ${path}); start it with \`podwire agent --config FILE\`, or point to it with --config or --socket`,
          ),
        );
      } else reject(new IoError(`control socket ${path}: ${err.message}`, { cause: err }));
    });
    sock.on('end', () => {
      // The CNI socket answers in the relay's protocol: a status byte (0 or 1), then its stdout. The
      // agent refuses the CLI's JSON line there at once (cni-server.ts), so this comes quickly.
      if (buf.length > 0 && buf.charCodeAt(0) < 0x20) {
        reject(
          new InvalidConfigError(
            `${path} is the CNI socket, the one the relay (podwire-cni) talks to, not the agent's control socket; the control socket is beside it: pass --socket ${controlSocketPath(path)}, or --config FILE`,
          ),
        );
        return;
      }
      try {
        const res = JSON.parse(buf) as {
          ok: boolean;
          result?: unknown;
          error?: { code: string; message: string };
        };
        if (res.ok) resolve(res.result);
        else reject(new InternalError(`agent: ${res.error?.message} (${res.error?.code})`));
      } catch (err) {
        reject(new DecodeError(`control socket ${path}: unreadable answer`, { cause: err }));
      }
    });
  });
}
