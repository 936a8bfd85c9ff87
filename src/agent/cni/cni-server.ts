/**
 * The unix socket the relay (`bin/podwire-cni`) connects to. One connection carries one call:
 *   request:  u32 big-endian N, N bytes of "KEY=VALUE\0" (the CNI_* environment), then stdin until EOF
 *   response: one byte (the relay's exit code), then the bytes to print on stdout, then EOF
 */
import { isUtf8 } from 'node:buffer';
import { createServer, type Server, type Socket } from 'node:net';
import { DecodeError, InvalidEnvError } from '../../base/errors.js';
import { toCniErrorObject } from '../../cni/errors.js';
import { quote } from '../../cni/names.js';
import { LATEST_VERSION } from '../../cni/versions.js';
import type { Logger } from '../log.js';
import { type BoundSocketFile, listenUnix, unlinkOwnSocket } from '../unix-listen.js';
import type { CniAnswer } from './cni-dispatch.js';

/** What goes back to the relay: its exit code and stdout. */
type RelayAnswer = Pick<CniAnswer, 'exitCode' | 'stdout'>;

/**
 * A request larger than this is refused: a network configuration is a few KiB. The relay caps stdin
 * at 1 MiB itself; the margin is for the environment block.
 */
const MAX_REQUEST = (1 << 20) + (64 << 10);

/**
 * A relay sends its whole request at once; a connection that has not finished sending it this long
 * after it was accepted is closed (a stuck or hostile client must not hold a descriptor for ever). A
 * deadline, not an idle timeout: a writer that trickles a byte now and then is never idle, and was
 * held for as long as it went on (issue 15, the socket fuzz run). Waiting for the answer has no such
 * bound: an ADD may take as long as it takes, and the relay has its own timeout.
 */
export const REQUEST_READ_TIMEOUT_MS = 5000;

/** Connections at once; more are refused by the kernel side of accept (the relay then says 11). */
export const MAX_CONNECTIONS = 1024;

export interface RelayRequest {
  env: Record<string, string>;
  stdin: Buffer;
}

/**
 * Decodes one request frame; throws ERR_DECODE on a malformed one, and ERR_INVALID_ENV (code 4, naming
 * the variable) on an entry that is not UTF-8: decoded leniently, `CNI_IFNAME=eth\xff` would become
 * another name (`eth\u{fffd}`) and be acted on.
 */
export function decodeRequest(frame: Buffer): RelayRequest {
  if (frame.length < 4) throw new DecodeError('relay request shorter than its header');
  const n = frame.readUInt32BE(0);
  if (n > frame.length - 4) throw new DecodeError('relay request environment block truncated');
  const env: Record<string, string> = {};
  const block = frame.subarray(4, 4 + n);
  for (let at = 0; at < block.length; ) {
    const nul = block.indexOf(0, at);
    const entry = block.subarray(at, nul < 0 ? block.length : nul);
    at += entry.length + 1;
    if (entry.length === 0) continue;
    // '=' (0x3d) never occurs inside a multi-byte UTF-8 sequence, so the split is sound on the bytes.
    const eq = entry.indexOf(0x3d);
    if (eq <= 0) {
      throw new DecodeError(
        `relay request: malformed environment entry ${JSON.stringify(entry.toString('utf8'))}`,
      );
    }
    const name = entry.subarray(0, eq);
    const value = entry.subarray(eq + 1);
    if (!isUtf8(name)) throw new InvalidEnvError(`${quote(name.toString('utf8'))}: name is not valid UTF-8`);
    if (!isUtf8(value)) {
      throw new InvalidEnvError(
        `${name.toString('utf8')}: not valid UTF-8 (${quote(value.toString('utf8'))})`,
      );
    }
    env[name.toString('utf8')] = value.toString('utf8');
  }
  return { env, stdin: frame.subarray(4 + n) };
}

export function encodeRequest(req: RelayRequest): Buffer {
  const env = Buffer.from(
    Object.entries(req.env)
      .map(([k, v]) => `${k}=${v}\0`)
      .join(''),
  );
  const head = Buffer.alloc(4);
  head.writeUInt32BE(env.length);
  return Buffer.concat([head, env, req.stdin]);
}

export class CniServer {
  readonly path: string;
  readonly #server: Server;
  #file: BoundSocketFile | undefined;
  readonly #log: Logger;
  readonly #sockets = new Set<Socket>();

  constructor(path: string, handle: (req: RelayRequest) => Promise<RelayAnswer>, log: Logger) {
    this.path = path;
    this.#log = log;
    // allowHalfOpen: the relay half-closes after its request and reads the answer afterwards.
    this.#server = createServer({ allowHalfOpen: true }, (sock) => this.#serve(sock, handle));
    this.#server.maxConnections = MAX_CONNECTIONS;
  }

  /** Listens on the path (replacing a stale socket file) with mode 0600. */
  async listen(): Promise<void> {
    this.#file = await listenUnix(this.#server, this.path, (err) =>
      this.#log.error('CNI socket error (serving on)', { err: err.message }),
    );
  }

  /** Stops accepting; waits for calls in progress to answer. */
  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    unlinkOwnSocket(this.#file);
  }

  /** Stops at once: open connections are destroyed (the relay answers "try again later"). */
  destroy(): void {
    for (const s of this.#sockets) s.destroy();
    this.#server.close();
    unlinkOwnSocket(this.#file);
  }

  #serve(sock: Socket, handle: (req: RelayRequest) => Promise<RelayAnswer>): void {
    this.#sockets.add(sock);
    const chunks: Buffer[] = [];
    let size = 0;
    /** The environment block's length from the header, once its 4 bytes are in. */
    let declared: number | undefined;
    let refused = false;
    const deadline = setTimeout(() => sock.destroy(), REQUEST_READ_TIMEOUT_MS);
    sock.on('data', (chunk: Buffer) => {
      if (refused) return; // the rest is read and dropped
      size += chunk.length;
      chunks.push(chunk);
      // Also a header that declares more than the limit, answered at once rather than after the
      // deadline: what a client of another protocol sends (the CLI's JSON line, '{' = 0x7b, when its
      // --socket names this socket instead of control.sock) is told at once that this is not it.
      if (declared === undefined && size >= 4) declared = Buffer.concat(chunks).readUInt32BE(0);
      if (size > MAX_REQUEST || (declared ?? 0) > MAX_REQUEST) {
        refused = true;
        // The answer goes out and the write side is ended, but the rest of the request is still
        // read (and dropped) until the sender's EOF or the deadline above. Closing with it unread
        // would hit the relay with EPIPE or ECONNRESET while it is still sending, and an older relay
        // then reports 11 ("try again later") instead of this answer.
        this.#reply(sock, {
          exitCode: 1,
          stdout: JSON.stringify({
            cniVersion: LATEST_VERSION,
            code: 6,
            msg:
              size > MAX_REQUEST
                ? `request larger than ${MAX_REQUEST} bytes`
                : `request header declares ${declared} bytes of environment, more than a request may have (${MAX_REQUEST} bytes): not a podwire relay request`,
          }),
        });
        chunks.length = 0;
        return;
      }
    });
    sock.on('end', () => {
      clearTimeout(deadline);
      if (refused) return;
      let answer: Promise<RelayAnswer>;
      try {
        answer = handle(decodeRequest(Buffer.concat(chunks)));
      } catch (err) {
        answer = Promise.resolve({
          exitCode: 1,
          stdout: JSON.stringify(toCniErrorObject(err, LATEST_VERSION)),
        });
      }
      answer.then(
        (a) => this.#reply(sock, a),
        (err: unknown) => {
          this.#log.error('dispatch threw', { err: String(err) });
          this.#reply(sock, { exitCode: 1, stdout: JSON.stringify(toCniErrorObject(err, LATEST_VERSION)) });
        },
      );
    });
    sock.on('error', (err) => this.#log.warn('relay connection error', { err: err.message }));
    sock.on('close', () => {
      clearTimeout(deadline);
      this.#sockets.delete(sock);
    });
  }

  /** A result or error object ends with a newline: at a shell, the prompt comes on a line of its own. */
  #reply(sock: Socket, a: RelayAnswer): void {
    if (sock.destroyed) return;
    const stdout = a.stdout === '' || a.stdout.endsWith('\n') ? a.stdout : `${a.stdout}\n`;
    sock.end(Buffer.concat([Buffer.from([a.exitCode & 0xff]), Buffer.from(stdout)]));
  }
}
