/** Traffic between namespaces for OVS tests: ping, a TCP exchange, captures. */
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { run } from '../../../bed/exec.js';

export const PYTHON = '/usr/bin/python3';

export async function ping(fromNs: string, to: string, count = 1): Promise<boolean> {
  const args = ['netns', 'exec', fromNs, 'ping', '-c', String(count), '-W', '2', to];
  if (to.includes(':')) args.splice(4, 0, '-6');
  return (await run('ip', args)).code === 0;
}

/** Listens on IP:PORT, reads a line, answers 200 kB and the byte count it read. */
const SERVER = `
import socket, sys
ip, port = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET6 if ':' in ip else socket.AF_INET)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((ip, port)); s.listen(); s.settimeout(10)
print('listening', flush=True)
c, _ = s.accept(); c.settimeout(10); data = b''
while not data.endswith(b'\\n'):
    d = c.recv(65536)
    if not d: break
    data += d
c.sendall(b'x' * 200000 + b'\\n' + str(len(data)).encode()); c.close()
`;

const CLIENT = `
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
c.sendall(b'y' * 100000 + b'\\n'); got = b''
while True:
    d = c.recv(65536)
    if not d: break
    got += d
print(len(got), got.split(b'\\n')[-1].decode())
`;

/**
 * A TCP exchange large enough to need many full-size segments both ways (100 kB up, 200 kB down):
 * resolves with what the client printed, "200001 100001" when every byte arrived.
 */
export async function tcpExchange(
  serverNs: string,
  ip: string,
  clientNs: string,
  port = 9000,
): Promise<string> {
  const server = spawn('ip', ['netns', 'exec', serverNs, PYTHON, '-c', SERVER, ip, String(port)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  server.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  server.stderr.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const exited = new Promise((res) => server.once('exit', res));
  try {
    const deadline = Date.now() + 5000;
    while (!out.includes('listening')) {
      if (server.exitCode !== null || Date.now() > deadline)
        throw new Error(`TCP server did not start: ${err}`);
      await sleep(10);
    }
    const client = await run('ip', [
      'netns',
      'exec',
      clientNs,
      'timeout',
      '8',
      PYTHON,
      '-c',
      CLIENT,
      ip,
      String(port),
    ]);
    return client.code === 0 ? client.stdout.trim() : `client exited ${client.code}: ${client.stderr.trim()}`;
  } finally {
    if (server.exitCode === null) server.kill('SIGKILL');
    await exited;
  }
}

export { capture } from '../../../bed/tcpdump.js';
