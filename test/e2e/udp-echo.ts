/**
 * UDP through a hostPort: a Python echo server in a namespace (IPv4 and IPv6 on one socket) and a
 * client that sends from another namespace the test made and waits for the echo (I7).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { run } from '../../bed/exec.js';

const SERVER = `
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(('::', int(sys.argv[1])))
print('ready', flush=True)
while True:
    data, peer = s.recvfrom(2048)
    s.sendto(data, peer)
`;

/** Sends up to 3 datagrams, 1 s apart, until one comes back; prints the echo or nothing. */
const CLIENT = `
import socket, sys
host, port, token = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
s = socket.socket(socket.AF_INET6 if ':' in host else socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1)
for _ in range(3):
    s.sendto(token, (host, port))
    try:
        print(s.recv(2048).decode(), end='')
        break
    except socket.timeout:
        pass
`;

/** From namespace `ns`, `token` sent to HOST:PORT over UDP: the echo, or undefined when none came. */
export async function udpEcho(
  ns: string,
  host: string,
  port: number,
  token: string,
): Promise<string | undefined> {
  const r = await run('ip', [
    'netns',
    'exec',
    ns,
    '/usr/bin/python3',
    '-c',
    CLIENT,
    host,
    String(port),
    token,
  ]);
  if (r.code !== 0) throw new Error(`UDP client in ${ns} failed: ${r.stderr}`);
  return r.stdout === '' ? undefined : r.stdout;
}

export class UdpEchoServer {
  readonly #child: ChildProcess;

  private constructor(child: ChildProcess) {
    this.#child = child;
  }

  static async start(ns: string, port: number): Promise<UdpEchoServer> {
    const child = spawn('ip', ['netns', 'exec', ns, '/usr/bin/python3', '-c', SERVER, String(port)], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const server = new UdpEchoServer(child);
    let out = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    const deadline = Date.now() + 10_000;
    while (!out.includes('ready')) {
      if (child.exitCode !== null || Date.now() > deadline) {
        await server.stop();
        throw new Error(`UDP echo server in ${ns} did not start`);
      }
      await sleep(20);
    }
    return server;
  }

  async stop(): Promise<void> {
    const c = this.#child;
    if (c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => c.once('exit', () => resolve()));
    c.kill('SIGKILL');
    await exited;
  }
}
