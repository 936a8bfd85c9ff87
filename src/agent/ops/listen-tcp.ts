/** Listening on "host:port" for the agent's HTTP endpoints (metrics, health). */
import type { Server } from 'node:net';

/**
 * Listens on "host:port" ("[::1]:9105" for IPv6) and resolves with the bound port (0 picks one).
 * After listening, `onError` stays the server's error listener: a failed accept is logged, not fatal.
 */
export async function listenHostPort(
  server: Server,
  address: string,
  what: string,
  onError: (err: Error) => void,
): Promise<number> {
  const m = /^\[?([^\]]*)\]?:(\d+)$/.exec(address);
  if (!m) throw new Error(`${what} address ${address}: expected host:port`);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(Number(m[2]), m[1], () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', onError);
  const bound = server.address();
  return typeof bound === 'object' && bound ? bound.port : Number(m[2]);
}
