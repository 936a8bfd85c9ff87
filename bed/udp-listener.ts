/**
 * A UDP listener in a namespace the test made (python3, one short-lived process): what a victim's
 * socket heard, for tests that send forged datagrams and then genuine ones.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';

const UDP_LISTEN = `
import socket, sys, time
family = socket.AF_INET6 if sys.argv[1] == '6' else socket.AF_INET
s = socket.socket(family, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('::' if family == socket.AF_INET6 else '0.0.0.0', int(sys.argv[2])))
s.settimeout(0.1)
print('ready', flush=True)
end = time.time() + float(sys.argv[3])
until = sys.argv[4] if len(sys.argv) > 4 else None
while time.time() < end:
    try:
        d, a = s.recvfrom(200)
        print(a[0], d.decode(errors='replace'), flush=True)
        if until is not None and d.decode(errors='replace') == until:
            end = min(end, time.time() + 0.5)
    except socket.timeout:
        pass
`;

/** One datagram heard: its source address and its payload. */
export interface Heard {
  from: string;
  payload: string;
}

/**
 * Listens in `ns` on UDP `port` (any address of the family) for `seconds`: resolves once the socket
 * is bound; `heard` resolves, once the listener has exited, with what it received. The process ends
 * by itself after `seconds`, or half a second after a datagram whose payload is `until` (the genuine
 * one a test sends last): a window long enough for a loaded machine, and no longer than needed.
 */
export async function udpListener(
  ns: string,
  family: 4 | 6,
  port: number,
  seconds: number,
  until?: string,
): Promise<{ heard: Promise<Heard[]> }> {
  const args = [`${family}`, `${port}`, `${seconds}`, ...(until === undefined ? [] : [until])];
  const child = spawn('ip', ['netns', 'exec', ns, '/usr/bin/python3', '-u', '-c', UDP_LISTEN, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (b: Buffer) => {
    out += b.toString();
  });
  child.stderr.on('data', (b: Buffer) => {
    err += b.toString();
  });
  const exited = once(child, 'exit');
  while (!out.startsWith('ready\n')) {
    if (child.exitCode !== null) throw new Error(`UDP listener in ${ns} exited: ${err}`);
    await sleep(50);
  }
  const heard = exited.then(() =>
    out
      .split('\n')
      .slice(1)
      .filter(Boolean)
      .map((line) => {
        const space = line.indexOf(' ');
        return { from: line.slice(0, space), payload: line.slice(space + 1) };
      }),
  );
  return { heard };
}
