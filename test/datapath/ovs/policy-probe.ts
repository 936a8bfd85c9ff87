/**
 * Probes for NetworkPolicy tests: a server in a pod's namespace that answers TCP connections and UDP
 * datagrams on given ports (both families), and a client that opens one new connection (TCP) or sends
 * one datagram from a fresh socket (UDP) and says whether the answer came back. Each probe is a new
 * connection to conntrack, so it is judged by the rules, not passed as an established one: a UDP probe
 * binds a source port of `udpSources`.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { run } from '../../../bed/exec.js';
import { udpSources } from '../policy-probe.js';
import { PYTHON } from './traffic.js';

const SERVER = `
import socket, sys, threading
ports = [int(p) for p in sys.argv[1:]]
def tcp(s):
    while True:
        c, _ = s.accept()
        try: c.sendall(b'ok\\n')
        except OSError: pass
        c.close()
def udp(s):
    while True:
        d, a = s.recvfrom(2048)
        s.sendto(b'ok:' + d, a)
for p in ports:
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        s = socket.socket(socket.AF_INET6, kind)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(('::', p))
        if kind == socket.SOCK_STREAM: s.listen(64)
        threading.Thread(target=tcp if kind == socket.SOCK_STREAM else udp, args=(s,), daemon=True).start()
print('listening', flush=True)
threading.Event().wait()
`;

/** proto ip port count sport: count probes, each a new socket (UDP from sport + i); prints how many got an answer. */
const CLIENT = `
import socket, sys
proto, ip, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
count, sport = int(sys.argv[4]), int(sys.argv[5])
fam = socket.AF_INET6 if ':' in ip else socket.AF_INET
ok = 0
for i in range(count):
    try:
        if proto == 'tcp':
            c = socket.socket(fam, socket.SOCK_STREAM); c.settimeout(1.0)
            c.connect((ip, port)); got = c.recv(16); c.close()
            ok += got == b'ok\\n'
        else:
            c = socket.socket(fam, socket.SOCK_DGRAM); c.settimeout(1.0)
            try: c.bind(('::' if fam == socket.AF_INET6 else '0.0.0.0', sport + i))
            except OSError as e: sys.exit('source port %d: %s' % (sport + i, e))
            c.sendto(b'p%d' % i, (ip, port)); got, _ = c.recvfrom(64); c.close()
            ok += got == b'ok:p%d' % i
    except OSError:
        pass
print(ok, flush=True)
`;

export class ProbeServer {
  readonly #child: ChildProcess;
  readonly #exited: Promise<unknown>;

  private constructor(child: ChildProcess) {
    this.#child = child;
    this.#exited = new Promise((res) => child.once('exit', res));
  }

  /** Starts answering on `ports` (TCP and UDP, IPv4 and IPv6) inside `ns`. */
  static async start(ns: string, ports: number[]): Promise<ProbeServer> {
    const child = spawn('ip', ['netns', 'exec', ns, PYTHON, '-c', SERVER, ...ports.map(String)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const server = new ProbeServer(child);
    let out = '';
    let err = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.stderr?.on('data', (d: Buffer) => {
      err += d.toString();
    });
    const deadline = Date.now() + 10_000;
    while (!out.includes('listening')) {
      if (child.exitCode !== null || Date.now() > deadline) {
        await server.stop();
        throw new Error(`probe server did not start: ${err}`);
      }
      await sleep(20);
    }
    return server;
  }

  async stop(): Promise<void> {
    if (this.#child.exitCode === null && this.#child.signalCode === null) this.#child.kill('SIGKILL');
    await this.#exited;
  }
}

/** How many of `count` new connections (or datagrams) from `ns` to ip:port were answered. */
export async function probe(
  ns: string,
  proto: 'tcp' | 'udp',
  ip: string,
  port: number,
  count = 1,
): Promise<number> {
  const r = await run('ip', [
    'netns',
    'exec',
    ns,
    PYTHON,
    '-c',
    CLIENT,
    proto,
    ip,
    String(port),
    String(count),
    String(proto === 'udp' ? udpSources(count) : 0),
  ]);
  if (r.code !== 0) throw new Error(`probe client failed (${r.code}): ${r.stderr}`);
  return Number(r.stdout.trim());
}

/** Whether one new connection from `ns` to ip:port gets through and back. */
export async function reaches(ns: string, proto: 'tcp' | 'udp', ip: string, port: number): Promise<boolean> {
  return (await probe(ns, proto, ip, port)) === 1;
}
