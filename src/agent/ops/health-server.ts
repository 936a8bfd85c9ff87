/**
 * `/livez` and `/readyz` over HTTP on a loopback port (`healthAddress`, default 127.0.0.1:9109; `off`
 * turns it off), for the kubelet's probes.
 *
 * - live: the event loop answers, and its delay over the last minute stayed under LIVE_DELAY_LIMIT_MS.
 *   A loop that is stuck cannot answer at all, so the probe's own timeout catches that case; a loop
 *   that answers but was blocked for seconds is reported dead too, so the kubelet restarts it.
 * - ready: the datapath is ready, IPAM answers within READY_TIMEOUT_MS, and (in a cluster) the store
 *   is healthy and has not said that this node does not hold its pod CIDRs. Each check is named in
 *   the body, `ok` or why not.
 */
import { createServer, type Server } from 'node:http';
import { type IntervalHistogram, monitorEventLoopDelay } from 'node:perf_hooks';
import type { AgentContext } from '../context.js';
import type { Logger } from '../log.js';
import type { PolicyController } from '../policy/policy-controller.js';
import { notFound } from './http-not-found.js';
import { listenHostPort } from './listen-tcp.js';

export const DEFAULT_HEALTH_ADDRESS = '127.0.0.1:9109';
/** An event loop blocked this long (once in the last window) is not live. */
export const LIVE_DELAY_LIMIT_MS = 5000;
const WINDOW_MS = 60_000;
const READY_TIMEOUT_MS = 2000;

export interface HealthReport {
  ok: boolean;
  checks: Record<string, string>;
}

export class HealthServer {
  readonly #server: Server;
  readonly #log: Logger;
  readonly #delay: IntervalHistogram;
  readonly #window: NodeJS.Timeout;
  /** The largest event-loop delay seen in the previous full window, ms. */
  #previousMaxMs = 0;

  constructor(ctx: AgentContext, log: Logger) {
    this.#log = log;
    this.#delay = monitorEventLoopDelay({ resolution: 20 });
    this.#delay.enable();
    this.#window = setInterval(() => {
      this.#previousMaxMs = this.#delay.max / 1e6;
      this.#delay.reset();
    }, WINDOW_MS);
    this.#window.unref();
    this.#server = createServer((req, res) => {
      const answer = (r: HealthReport) =>
        res.writeHead(r.ok ? 200 : 503, { 'content-type': 'application/json' }).end(`${JSON.stringify(r)}\n`);
      if (req.method === 'GET' && req.url === '/livez') answer(this.live());
      else if (req.method === 'GET' && req.url === '/readyz')
        ready(ctx).then(answer, (err: unknown) => answer({ ok: false, checks: { ready: String(err) } }));
      else
        res
          .writeHead(404, { 'content-type': 'text/plain; charset=utf-8' })
          .end(
            `${notFound(req.method, req.url)}: this is the health port (healthAddress), which serves GET /livez and GET /readyz; metrics (GET /metrics) are on metricsAddress\n`,
          );
    });
  }

  live(): HealthReport {
    const maxMs = Math.max(this.#previousMaxMs, this.#delay.max / 1e6);
    const ok = maxMs < LIVE_DELAY_LIMIT_MS;
    return {
      ok,
      checks: { eventLoop: ok ? 'ok' : `blocked for ${Math.round(maxMs)} ms within the last minute` },
    };
  }

  /** Listens on "host:port" ("[::1]:9109" for IPv6). Resolves with the bound port (0 picks one). */
  async listen(address: string): Promise<number> {
    return listenHostPort(this.#server, address, 'healthAddress', (err) =>
      this.#log.error('health server error (serving on)', { err: err.message }),
    );
  }

  async close(): Promise<void> {
    clearInterval(this.#window);
    this.#delay.disable();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

async function ready(ctx: AgentContext): Promise<HealthReport> {
  const checks: Record<string, string> = {};
  const dp = ctx.datapath.status();
  checks.datapath = dp.ready ? 'ok' : `not ready: ${dp.reason ?? 'unknown'}`;
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      ctx.ipam.list(),
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`no answer within ${READY_TIMEOUT_MS} ms`)),
          READY_TIMEOUT_MS,
        );
      }),
    ]);
    checks.ipam = 'ok';
  } catch (err) {
    checks.ipam = `failing: ${err instanceof Error ? err.message : String(err)}`;
  } finally {
    clearTimeout(timer);
  }
  if (ctx.cluster) {
    const health = ctx.cluster.status().health;
    checks.clusterStore = health.ok ? 'ok' : `unhealthy: ${health.error ?? 'unknown'}`;
    const leaseProblem = ctx.cluster.leaseProblem;
    checks.podCIDRs = leaseProblem === undefined ? 'ok' : leaseProblem;
  }
  if (ctx.policy) checks.networkPolicy = policyCheck(ctx.policy);
  return { ok: Object.values(checks).every((c) => c === 'ok'), checks };
}

/** NetworkPolicy: in force from the live caches, or why not (decision 49). */
function policyCheck(policy: PolicyController): string {
  if (policy.lastError !== undefined) return `failing: the last apply failed: ${policy.lastError}`;
  if (policy.mode === 'snapshot')
    return 'not listed yet: the snapshot of the last known NetworkPolicy state is in force';
  if (policy.mode === 'unknown') return 'not listed yet: every pod of this node isolated until they are';
  return 'ok';
}
