/**
 * A unix-socket proxy in front of a daemon's socket (ovsdb-server's db.sock, a bridge's .mgmt), for
 * tests that need to cut, delay or answer a connection on cue: `down()` closes the listener and every
 * connection through it (the daemon itself keeps running), `up()` listens again, `delayMs` holds
 * every chunk that long in both directions, and `intercept` (JSON-RPC streams only, OVSDB) may answer
 * a request itself instead of passing it on. `close()` ends it all and removes the socket file.
 */
import { rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { JsonStreamSplitter } from '../src/datapath/ovs/json-stream.js';

export type JsonRpcRequest = { id?: unknown; method?: string; params?: unknown[] };

export class SocketProxy {
  readonly path: string;
  readonly target: string;
  delayMs = 0;
  /** Returns an answer to send back instead of passing the request to the daemon, or undefined. */
  intercept: ((request: JsonRpcRequest) => object | undefined) | undefined;
  /** Called once, at the next connection accepted. */
  onAccept: (() => void) | undefined;
  #server: Server | undefined;
  readonly #pairs = new Set<[Socket, Socket]>();

  constructor(path: string, target: string) {
    this.path = path;
    this.target = target;
  }

  up(): Promise<void> {
    rmSync(this.path, { force: true });
    const server = createServer((client) => this.#pipe(client));
    this.#server = server;
    return new Promise((resolve) => server.listen(this.path, resolve));
  }

  /** Stops listening and cuts every connection through the proxy. */
  down(): void {
    this.#server?.close();
    this.#server = undefined;
    rmSync(this.path, { force: true });
    this.cut();
  }

  /** Cuts every connection through the proxy; it keeps listening. */
  cut(): void {
    for (const [a, b] of this.#pairs) {
      a.destroy();
      b.destroy();
    }
    this.#pairs.clear();
  }

  close(): void {
    this.down();
  }

  #send(to: Socket, data: Buffer): void {
    if (this.delayMs > 0) setTimeout(() => to.destroyed || to.write(data), this.delayMs);
    else to.write(data);
  }

  #pipe(client: Socket): void {
    const daemon = connect(this.target);
    const pair: [Socket, Socket] = [client, daemon];
    this.#pairs.add(pair);
    const accepted = this.onAccept;
    this.onAccept = undefined;
    accepted?.();
    const split = new JsonStreamSplitter();
    client.on('data', (data: Buffer) => {
      const intercept = this.intercept;
      if (!intercept) {
        this.#send(daemon, data);
        return;
      }
      for (const request of split.push(data) as JsonRpcRequest[]) {
        const answer = intercept(request);
        this.#send(answer ? client : daemon, Buffer.from(JSON.stringify(answer ?? request)));
      }
    });
    daemon.on('data', (data: Buffer) => this.#send(client, data));
    for (const s of pair) {
      s.on('error', () => undefined); // the other side's close ends both (below)
      s.on('close', () => {
        client.destroy();
        daemon.destroy();
        this.#pairs.delete(pair);
      });
    }
  }
}
