/**
 * How the agent's Node.js process must be started. Both settings take effect only at process start
 * (Node's own module loader already uses the thread pool before any of our code runs), so they are
 * given by whoever starts the agent: bin/podwire (keep it in step), the test bed, the bench.
 */

/**
 * libuv's thread pool runs the agent's blocking kernel calls (link deletions waiting ~20 ms for RCU,
 * packet-socket closes waiting ~10 ms) beside the IPAM store's file I/O. With the default 4 threads a
 * burst of 100 DELs starved the store's fsyncs: measured here, burst DEL 2.2x the reference with 4
 * threads, 1.1x with 64 (`npm run bench -- --scenarios 2`).
 */
export const AGENT_THREADPOOL_SIZE = 64;

/**
 * - `--max-semi-space-size=1`: a 1 MiB young generation keeps the agent's RSS flat under a steady
 *   ADD/DEL load (60 -> 99 MiB over 600 cycles with the default 16 MiB; 1.06x with 1 MiB; bench
 *   scenario 3), at no measurable cost.
 * - `--expose-gc`: lets `IdleRelease` run a full collection once the agent falls quiet, which returns
 *   the garbage promoted under load and the native memory it holds (idle-release.ts, decision 16).
 */
export const AGENT_NODE_FLAGS = ['--max-semi-space-size=1', '--expose-gc'];

/** A warning for the log when the process was started without the thread pool it needs. */
export function threadpoolWarning(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const size = Number(env.UV_THREADPOOL_SIZE ?? 4);
  if (size >= AGENT_THREADPOOL_SIZE) return undefined;
  return `libuv thread pool of ${size} threads: start the agent with bin/podwire (or UV_THREADPOOL_SIZE=${AGENT_THREADPOOL_SIZE}); bursts of DEL will queue behind each other`;
}

/** A warning for the log when the process was started without the V8 collection `IdleRelease` runs. */
export function idleGcWarning(gcExposed: boolean): string | undefined {
  if (gcExposed) return undefined;
  return 'node started without --expose-gc: start the agent with bin/podwire; after a burst, RSS stays up to ~15 MiB higher until V8 collects on its own';
}
