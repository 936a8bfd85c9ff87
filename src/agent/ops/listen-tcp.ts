/** Listening on "host:port" for the agent's HTTP endpoints (metrics, health). */
import type { Server } from 'node:net';
import { networkInterfaces } from 'node:os';
import { InvalidConfigError } from '../../base/errors.js';

/**
 * Listens on "host:port" ("[::1]:9105" for IPv6) and resolves with the bound port (0 picks one).
 * After listening, `onError` stays the server's error listener: a failed accept is logged, not fatal.
 * A listen that fails names the config key (`metricsAddress`, `healthAddress`) it came from.
 */
export async function listenHostPort(
  server: Server,
  address: string,
  key: string,
  onError: (err: Error) => void,
): Promise<number> {
  const m = /^\[?([^\]]*)\]?:(\d+)$/.exec(address);
  if (!m) throw new InvalidConfigError(`agent config: ${key}: ${address}: expected HOST:PORT`);
  const host = m[1] as string;
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(Number(m[2]), host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new InvalidConfigError(
      `agent config: ${key}: cannot listen on ${address} (${code})${hint(code, host)}`,
      {
        cause: err,
      },
    );
  }
  server.on('error', onError);
  const bound = server.address();
  return typeof bound === 'object' && bound ? bound.port : Number(m[2]);
}

function hint(code: string, host: string): string {
  if (code === 'EADDRINUSE') return ': another process listens there';
  if (code !== 'EADDRNOTAVAIL') return '';
  // The loopback interface has its addresses only while it is up: a new network namespace's is down.
  const loopback = host === 'localhost' || host === '::1' || host.startsWith('127.');
  if (loopback && networkInterfaces().lo === undefined)
    return ': the loopback interface is down in this network namespace (ip link set lo up)';
  return `: no interface of this network namespace has ${host}`;
}
