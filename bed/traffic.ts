/**
 * Traffic between test pods: ICMP with ping, TCP with a tiny Python echo server in each pod and one
 * client per source pod that tries every target, and a server that answers with the address it sees
 * the client at (what a masquerade changes). Processes are killed when `stop` runs.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { run } from './exec.js';

export const TCP_PORT = 7777;

const SERVER = `
import socket, threading
def serve(family, addr):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((addr, ${TCP_PORT})); s.listen(64)
    while True:
        c, _ = s.accept(); c.sendall(c.recv(64)); c.close()
threading.Thread(target=serve, args=(socket.AF_INET6, '::'), daemon=True).start()
print('ready', flush=True)
serve(socket.AF_INET, '0.0.0.0')
`;

const CLIENT = `
import json, socket, sys
out = {}
for ip in sys.argv[1:]:
    fam = socket.AF_INET6 if ':' in ip else socket.AF_INET
    try:
        s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(3)
        s.connect((ip, ${TCP_PORT})); s.sendall(b'podwire'); out[ip] = s.recv(64) == b'podwire'; s.close()
    except Exception as e:
        out[ip] = False
print(json.dumps(out))
`;

/** The port of the server that answers each connection with the client's address as it sees it. */
export const PEER_PORT = 7778;

/** Answers each connection with the peer address it accepted it from, then closes. */
export const PEER_SERVER = `
import socket, threading
def serve(family, addr):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((addr, ${PEER_PORT})); s.listen(64)
    while True:
        c, peer = s.accept(); c.sendall(peer[0].encode()); c.close()
threading.Thread(target=serve, args=(socket.AF_INET6, '::'), daemon=True).start()
print('ready', flush=True)
serve(socket.AF_INET, '0.0.0.0')
`;

const PEER_CLIENT = `
import socket, sys
ip = sys.argv[1]
s = socket.socket(socket.AF_INET6 if ':' in ip else socket.AF_INET, socket.SOCK_STREAM); s.settimeout(float(sys.argv[2]))
try:
    s.connect((ip, ${PEER_PORT})); print(s.recv(64).decode())
except Exception as e:
    print('')
`;

/**
 * From namespace `ns`, a TCP connection to `ip`'s peer server (PEER_SERVER): the source address the
 * server saw, or undefined when there was no answer within `timeoutS`.
 */
export async function peerSeenBy(ns: string, ip: string, timeoutS = 3): Promise<string | undefined> {
  const r = await run('ip', [
    'netns',
    'exec',
    ns,
    '/usr/bin/python3',
    '-c',
    PEER_CLIENT,
    ip,
    String(timeoutS),
  ]);
  if (r.code !== 0) throw new Error(`peer client in ${ns} failed: ${r.stderr}`);
  return r.stdout.trim() || undefined;
}

export class TcpServers {
  readonly #children: ChildProcess[] = [];
  readonly #script: string;
  readonly #args: readonly string[];

  /** `script`: the Python server each namespace runs (the echo server, or PEER_SERVER); `args`: its argv. */
  constructor(script: string = SERVER, args: readonly string[] = []) {
    this.#script = script;
    this.#args = args;
  }

  /** Starts an echo server in each namespace; resolves when all listen. */
  async start(namespaces: readonly string[]): Promise<void> {
    await Promise.all(
      namespaces.map(async (ns) => {
        const child = spawn(
          'ip',
          ['netns', 'exec', ns, '/usr/bin/python3', '-c', this.#script, ...this.#args],
          {
            stdio: ['ignore', 'pipe', 'ignore'],
          },
        );
        this.#children.push(child);
        let out = '';
        child.stdout?.on('data', (d: Buffer) => {
          out += d.toString();
        });
        const deadline = Date.now() + 10_000;
        while (!out.includes('ready')) {
          if (child.exitCode !== null || Date.now() > deadline)
            throw new Error(`TCP server in ${ns} did not start`);
          await sleep(20);
        }
      }),
    );
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.#children.map((c) =>
        c.exitCode !== null || c.signalCode !== null
          ? Promise.resolve()
          : new Promise<void>((resolve) => {
              c.once('exit', () => resolve());
              c.kill('SIGKILL');
            }),
      ),
    );
    this.#children.length = 0;
  }
}

/** From namespace `ns`, a TCP round trip to each target address: address -> success. */
export async function tcpFrom(ns: string, targets: readonly string[]): Promise<Record<string, boolean>> {
  const r = await run('ip', ['netns', 'exec', ns, '/usr/bin/python3', '-c', CLIENT, ...targets]);
  if (r.code !== 0) throw new Error(`TCP client in ${ns} failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as Record<string, boolean>;
}

/** One ICMP echo from `ns` to `ip`, waiting at most `waitS` seconds. */
export async function pingFrom(ns: string, ip: string, waitS = 2): Promise<boolean> {
  const args = [
    'netns',
    'exec',
    ns,
    'ping',
    ...(ip.includes(':') ? ['-6'] : []),
    '-c',
    '1',
    '-W',
    String(waitS),
    ip,
  ];
  return (await run('ip', args)).code === 0;
}
