/** The Prometheus endpoint: GET /metrics on the configured address; off unless configured. */
import { createServer, type Server } from 'node:http';
import type { Logger } from '../log.js';
import { notFound } from './http-not-found.js';
import { listenHostPort } from './listen-tcp.js';
import { type Counter, type Histogram, renderSampled, type Sampled } from './metrics.js';

export class MetricsServer {
  readonly #server: Server;
  readonly #log: Logger;

  constructor(collectors: ReadonlyArray<Counter | Histogram>, sampled: readonly Sampled[], log: Logger) {
    this.#log = log;
    this.#server = createServer((req, res) => {
      if (req.method !== 'GET' || (req.url !== '/metrics' && req.url !== '/')) {
        res
          .writeHead(404, { 'content-type': 'text/plain; charset=utf-8' })
          .end(
            `${notFound(req.method, req.url)}: this is the metrics port (metricsAddress), which serves GET /metrics only; the probes /livez and /readyz are on healthAddress\n`,
          );
        return;
      }
      Promise.all(sampled.map(renderSampled)).then(
        (parts) => {
          const body = `${[...collectors.map((c) => c.render()), ...parts].join('\n')}\n`;
          res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' }).end(body);
        },
        (err: unknown) => {
          log.error('metrics scrape failed', { err: String(err) });
          res.writeHead(500).end(`scrape failed: ${String(err)}\n`);
        },
      );
    });
  }

  /** Listens on "host:port" ("[::1]:9105" for IPv6). Resolves with the bound port (0 picks one). */
  async listen(address: string): Promise<number> {
    return listenHostPort(this.#server, address, 'metricsAddress', (err) =>
      this.#log.error('metrics server error (serving on)', { err: err.message }),
    );
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
