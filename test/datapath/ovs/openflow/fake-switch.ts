/**
 * A scripted OpenFlow 1.3 switch on a unix socket in a temporary directory, for what a real switch
 * cannot be made to do on demand (close a connection 1000 times, split its messages byte by byte,
 * hold replies, send garbage). It answers HELLO with its own HELLO, FEATURES_REQUEST with a
 * FEATURES_REPLY, ECHO_REQUEST with ECHO_REPLY, and hands every other message to `onMessage`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OfpFramer } from '../../../../src/datapath/ovs/openflow/framing.js';
import {
  decodeHeader,
  encodeMessage,
  OFPT13,
  type OfpHeader,
} from '../../../../src/datapath/ovs/openflow/header.js';

export class FakeSwitch {
  readonly dir = mkdtempSync(join(tmpdir(), 'pwt-offake-'));
  readonly path = join(this.dir, 'br.mgmt');
  readonly sockets = new Set<Socket>();
  /** Connections accepted so far. */
  accepted = 0;
  /** The HELLO body the switch sends (default: a version bitmap with 1.0, 1.3 and 1.4) and its header version. */
  hello = { version: 0x05, bitmap: (1 << 1) | (1 << 4) | (1 << 5) };
  datapathId = 0x1234n;
  /** Write each message one byte at a time. */
  trickle = false;
  /** Every message other than HELLO, FEATURES_REQUEST and ECHO_REQUEST. */
  onMessage: (sock: Socket, h: OfpHeader, body: Buffer) => void = () => undefined;
  /** Called when a connection's handshake is done (FEATURES_REPLY sent). */
  onUp: (sock: Socket) => void = () => undefined;
  readonly #server: Server;

  constructor() {
    this.#server = createServer((sock) => this.#accept(sock));
  }

  listen(): Promise<void> {
    return new Promise((res) => this.#server.listen(this.path, res));
  }

  send(sock: Socket, type: number, xid: number, body?: Uint8Array): void {
    const msg = encodeMessage(0x04, type, xid, body);
    if (!this.trickle) {
      sock.write(msg);
      return;
    }
    for (const b of msg) sock.write(Buffer.from([b]));
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((res) => this.#server.close(res));
    rmSync(this.dir, { recursive: true, force: true });
  }

  #accept(sock: Socket): void {
    this.accepted++;
    this.sockets.add(sock);
    sock.on('close', () => this.sockets.delete(sock));
    sock.on('error', () => undefined); // the client going away mid-write is what these tests do
    const hello = Buffer.alloc(8);
    hello.writeUInt16BE(1, 0);
    hello.writeUInt16BE(8, 2);
    hello.writeUInt32BE(this.hello.bitmap >>> 0, 4);
    const msg = encodeMessage(this.hello.version, OFPT13.HELLO, 1, hello);
    sock.write(msg);
    const framer = new OfpFramer();
    sock.on('data', (chunk: Buffer) => {
      for (const m of framer.push(chunk)) {
        const h = decodeHeader(m);
        const body = m.subarray(8);
        if (h.type === OFPT13.HELLO) continue;
        if (h.type === OFPT13.ECHO_REQUEST) this.send(sock, OFPT13.ECHO_REPLY, h.xid, body);
        else if (h.type === OFPT13.FEATURES_REQUEST) {
          const f = Buffer.alloc(24);
          f.writeBigUInt64BE(this.datapathId, 0);
          f.writeUInt8(254, 12);
          this.send(sock, OFPT13.FEATURES_REPLY, h.xid, f);
          this.onUp(sock);
        } else this.onMessage(sock, h, body);
      }
    });
  }
}
