/**
 * The HTTP transport to the API server, over node:https (decision 43 says why not a client
 * library): one-shot JSON requests on a keep-alive agent, and watch streams read as lines.
 *
 * Credentials come from a `KubeConnection` (kube-config.ts): the server's certificate is always
 * verified against its CA; a client certificate, or a bearer token. A token file is read again
 * whenever its inode, size or modification time changed (the kubelet rotates service account
 * tokens by replacing the file), so a rotated token is used from the next request on.
 *
 * `connect` replaces the TCP connection (the bed makes its sockets inside a network namespace);
 * TLS goes over it all the same.
 */
import { readFileSync, statSync } from 'node:fs';
import https from 'node:https';
import type { Socket } from 'node:net';
import { isIP } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { KubeConnection } from './kube-config.js';
import { answerError, KubeApiError, transportError } from './kube-error.js';

export type ConnectFn = (target: { host: string; port: number }) => Socket;

export interface KubeClientOptions {
  connect?: ConnectFn;
  /** A one-shot request's deadline; default 30 s. */
  requestTimeoutMs?: number;
}

export interface Response {
  status: number;
  body: string;
}

export class KubeClient {
  readonly server: string;
  readonly #conn: KubeConnection;
  readonly #host: string;
  readonly #port: number;
  readonly #connect: ConnectFn | undefined;
  readonly #agent: https.Agent | undefined;
  readonly #timeoutMs: number;
  #token: { value: string; stamp: string } | undefined;

  constructor(conn: KubeConnection, opts: KubeClientOptions = {}) {
    this.#conn = conn;
    this.server = conn.server;
    const url = new URL(conn.server);
    this.#host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    this.#port = Number(url.port || 443);
    this.#connect = opts.connect;
    this.#timeoutMs = opts.requestTimeoutMs ?? 30_000;
    this.#agent = opts.connect ? undefined : new https.Agent({ keepAlive: true, maxFreeSockets: 2 });
  }

  /** The bearer token now: the fixed one, or the token file's, read again when the file changed. */
  #bearer(): string | undefined {
    if (this.#conn.token !== undefined) return this.#conn.token;
    const file = this.#conn.tokenFile;
    if (file === undefined) return undefined;
    let stamp: string;
    try {
      const st = statSync(file);
      stamp = `${st.ino}:${st.size}:${st.mtimeMs}`;
    } catch (err) {
      if (this.#token) return this.#token.value; // rotation in progress (file replaced): last token stands
      throw transportError(`token file ${file}`, err);
    }
    if (this.#token?.stamp !== stamp) {
      this.#token = { value: readFileSync(file, 'utf8').trim(), stamp };
    }
    return this.#token.value;
  }

  #options(method: string, path: string, headers: Record<string, string>): https.RequestOptions {
    const tls = {
      ca: this.#conn.ca,
      ...(this.#conn.cert ? { cert: this.#conn.cert, key: this.#conn.key } : {}),
      ...(isIP(this.#host) ? {} : { servername: this.#host }),
    };
    const token = this.#bearer();
    const all: Record<string, string> = { accept: 'application/json', ...headers };
    if (token !== undefined) all.authorization = `Bearer ${token}`;
    const base: https.RequestOptions = {
      host: this.#host,
      port: this.#port,
      method,
      path,
      headers: all,
      ...tls,
    };
    const connect = this.#connect;
    if (connect === undefined) return { ...base, agent: this.#agent };
    return {
      ...base,
      createConnection: () =>
        tlsConnect({ socket: connect({ host: this.#host, port: this.#port }), host: this.#host, ...tls }),
    };
  }

  /** One request, its whole answer read; rejects only when no answer came (a KubeApiError). */
  request(
    method: string,
    path: string,
    opts: { body?: unknown; contentType?: string; signal?: AbortSignal } = {},
  ): Promise<Response> {
    const what = `${method} ${this.server}${path}`;
    return new Promise((resolve, reject) => {
      let req: ReturnType<typeof https.request>;
      try {
        const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
        const headers: Record<string, string> = {};
        if (body !== undefined) headers['content-type'] = opts.contentType ?? 'application/json';
        req = https.request(this.#options(method, path, headers));
        req.end(body);
      } catch (err) {
        reject(transportError(what, err));
        return;
      }
      const onAbort = (): void => {
        req.destroy(new KubeApiError(`${what}: aborted`, { unreachable: true }));
      };
      const timer = setTimeout(() => {
        req.destroy(new KubeApiError(`${what}: no answer in ${this.#timeoutMs} ms`, { unreachable: true }));
      }, this.#timeoutMs);
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      if (opts.signal?.aborted) onAbort();
      const done = (): void => {
        clearTimeout(timer);
        opts.signal?.removeEventListener('abort', onAbort);
      };
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (d: Buffer) => chunks.push(d));
        res.on('end', () => {
          done();
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') });
        });
        res.on('error', (err) => {
          done();
          reject(transportError(what, err));
        });
      });
      req.on('error', (err) => {
        done();
        reject(transportError(what, err));
      });
    });
  }

  /** GET that must answer 200 with JSON; any other answer is a KubeApiError from its Status. */
  async getJson(path: string, signal?: AbortSignal): Promise<unknown> {
    const r = await this.request('GET', path, signal ? { signal } : {});
    const what = `GET ${this.server}${path}`;
    if (r.status !== 200) throw answerError(what, r.status, r.body);
    try {
      return JSON.parse(r.body);
    } catch (err) {
      throw new KubeApiError(`${what}: answer is not JSON`, { status: 200, cause: err });
    }
  }

  /**
   * A streaming GET (a watch): yields each line of the answer as it arrives. A status other than
   * 200 throws its KubeApiError before any line; `onOpen` is called when the 200 arrives; a stream silent for `idleMs` is cut (an
   * unreachable KubeApiError), as is one whose `signal` aborts (then the generator just returns).
   */
  async *lines(
    path: string,
    signal: AbortSignal,
    idleMs: number,
    onOpen?: () => void,
  ): AsyncGenerator<string, void, undefined> {
    const what = `GET ${this.server}${path}`;
    const req = https.request(this.#options('GET', path, {}));
    const onAbort = (): void => {
      req.destroy();
    };
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      const res = await new Promise<import('node:http').IncomingMessage>((resolve, reject) => {
        req.on('response', resolve);
        req.on('error', reject);
        req.setTimeout(idleMs, () =>
          req.destroy(new KubeApiError(`${what}: silent for ${idleMs} ms`, { unreachable: true })),
        );
        req.end();
      }).catch((err: unknown) => {
        if (signal.aborted) return undefined;
        throw transportError(what, err);
      });
      if (res === undefined) return;
      if (res.statusCode !== 200) {
        const chunks: Buffer[] = [];
        for await (const d of res) chunks.push(d as Buffer);
        throw answerError(what, res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8'));
      }
      onOpen?.();
      res.setEncoding('utf8'); // a character split between chunks is decoded whole
      let rest = '';
      try {
        for await (const chunk of res) {
          rest += chunk as string;
          let nl = rest.indexOf('\n');
          while (nl >= 0) {
            const line = rest.slice(0, nl);
            rest = rest.slice(nl + 1);
            if (line.trim() !== '') yield line;
            nl = rest.indexOf('\n');
          }
        }
      } catch (err) {
        if (signal.aborted) return;
        throw transportError(what, err);
      }
      if (rest.trim() !== '') yield rest;
    } finally {
      signal.removeEventListener('abort', onAbort);
      req.destroy();
    }
  }

  /** Closes the idle keep-alive connections. */
  close(): void {
    this.#agent?.destroy();
  }
}
