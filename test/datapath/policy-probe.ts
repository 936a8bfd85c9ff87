/**
 * Probes for the NetworkPolicy tests: a Python server per namespace that echoes on TCP and UDP ports
 * (IPv4 and IPv6) and counts the UDP datagrams it hears, and a client that tries a list of
 * (protocol, address, port) and says which got an answer. Every process runs inside a namespace the
 * test made, and is killed by `stop`.
 */
import { spawn } from 'node:child_process';
import { run } from '../../bed/exec.js';
import { TcpServers } from '../../bed/traffic.js';

const SERVER = `
import socket, sys, threading
counts = {}
def tcp(family, port):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6: s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind(('::' if family == socket.AF_INET6 else '0.0.0.0', port)); s.listen(64)
    while True:
        c, _ = s.accept()
        try: c.sendall(c.recv(64))
        except Exception: pass
        c.close()
def udp(family, port):
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    if family == socket.AF_INET6: s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind(('::' if family == socket.AF_INET6 else '0.0.0.0', port))
    while True:
        d, a = s.recvfrom(256)
        if d.startswith(b'count'):
            counts[d] = counts.get(d, 0) + 1
        elif d.startswith(b'total'):
            s.sendto(str(counts.get(b'count' + d[5:], 0)).encode(), a)
        else:
            s.sendto(d, a)
for port in map(int, sys.argv[1:]):
    for fam in (socket.AF_INET, socket.AF_INET6):
        threading.Thread(target=tcp, args=(fam, port), daemon=True).start()
        threading.Thread(target=udp, args=(fam, port), daemon=True).start()
print('ready', flush=True)
threading.Event().wait()
`;

const CLIENT = `
import json, socket, sys
out = []
for probe in sys.argv[1:]:
    proto, ip, port, sport = probe.split(',')
    fam = socket.AF_INET6 if ':' in ip else socket.AF_INET
    ok = False
    try:
        if proto == 'tcp':
            s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(1.5)
            s.connect((ip, int(port))); s.sendall(b'podwire'); ok = s.recv(64) == b'podwire'
        else:
            # Five tries, as a UDP client would: the first datagrams to a neighbour still being
            # resolved are lost (IPv6, routed, right after the links came up: DAD still running).
            s = socket.socket(fam, socket.SOCK_DGRAM); s.settimeout(0.6)
            try: s.bind(('::' if fam == socket.AF_INET6 else '0.0.0.0', int(sport)))
            except OSError as e: sys.exit('source port %s: %s' % (sport, e))
            s.connect((ip, int(port)))
            for _ in range(5):
                s.send(b'podwire')
                try:
                    ok = s.recv(64) == b'podwire'
                    break
                except socket.timeout:
                    pass
        s.close()
    except Exception:
        pass
    out.append(ok)
print(json.dumps(out))
`;

/** Sends `count` datagrams of one flow (one source port), then asks how many arrived. */
const STREAM = `
import socket, sys, time
ip, port, count, tag = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
fam = socket.AF_INET6 if ':' in ip else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM); s.connect((ip, port))
for i in range(count):
    s.send(b'count' + tag.encode()); time.sleep(0.002)
q = socket.socket(fam, socket.SOCK_DGRAM); q.settimeout(2); q.connect((ip, port))
time.sleep(0.2); q.send(b'total' + tag.encode()); print(q.recv(64).decode())
`;

/**
 * UDP source ports for `count` probes, each handed out once per process (wrapping after 12,000), so a
 * probe is a new connection to conntrack. The kernel picks UDP source ports at random, and a pick that
 * met the tuple of an earlier allowed probe still in conntrack passed as established after the policy
 * had changed (landing CI of df05c5d: 3 probes against about 400 live entries in 28,000 ports, an
 * estimated 4 % of runs).
 */
// Below the kernel's ephemeral range (32768-60999), so no socket the kernel numbered holds one.
const SOURCE_PORTS = { first: 20000, size: 12000 };
let nextSource = Math.floor(Math.random() * SOURCE_PORTS.size);

export function udpSources(count: number): number {
  if (nextSource + count > SOURCE_PORTS.size) nextSource = 0;
  const first = SOURCE_PORTS.first + nextSource;
  nextSource += count;
  return first;
}

export type Probe = readonly ['tcp' | 'udp', string, number];

export class ProbeServers {
  #servers: TcpServers | undefined;

  /** Starts an echo server on `ports` (TCP and UDP, both families) in each namespace. */
  async start(namespaces: readonly string[], ports: readonly number[]): Promise<void> {
    this.#servers = new TcpServers(SERVER, ports.map(String));
    await this.#servers.start(namespaces);
  }

  async stop(): Promise<void> {
    await this.#servers?.stop();
    this.#servers = undefined;
  }
}

/** `python3 -c SCRIPT ARGS...` inside namespace `ns`; its stdout, or an error naming `what`. */
async function pythonIn(ns: string, what: string, script: string, args: readonly string[]): Promise<string> {
  const r = await run('ip', ['netns', 'exec', ns, '/usr/bin/python3', '-c', script, ...args]);
  if (r.code !== 0) throw new Error(`${what} in ${ns} failed: ${r.stderr}`);
  return r.stdout;
}

/** From namespace `ns`, each probe: whether it got its echo back. */
export async function probeFrom(ns: string, probes: readonly Probe[]): Promise<boolean[]> {
  const out = await pythonIn(
    ns,
    'probe client',
    CLIENT,
    probes.map((p) => [...p, p[0] === 'udp' ? udpSources(1) : 0].join(',')),
  );
  return JSON.parse(out) as boolean[];
}

/** Starts a one-way UDP stream of `count` datagrams from `ns`; resolves to how many the server heard. */
export async function udpStream(
  ns: string,
  ip: string,
  port: number,
  count: number,
  tag: string,
): Promise<number> {
  return Number((await pythonIn(ns, 'UDP stream', STREAM, [ip, String(port), String(count), tag])).trim());
}

/**
 * Sends datagrams tagged `tag` to `ip`:`port` as fast as it can for `seconds`, starting before the
 * namespace may even have its interface (a send that fails, no route yet, is not counted and tried
 * again at once): the first datagram that can leave, leaves.
 */
const RUSH = `
import socket, sys, time
ip, port, seconds, tag = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
fam = socket.AF_INET6 if ':' in ip else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM); s.setblocking(False)
payload = b'count' + tag.encode()
end = time.time() + seconds
sent = 0
print('ready', flush=True)
while time.time() < end:
    try:
        s.sendto(payload, (ip, port)); sent += 1
    except OSError:
        pass
print(sent, flush=True)
`;

/** `udpRush`: resolves once it runs; `sent` resolves with the datagrams that left the socket. */
export async function udpRush(
  ns: string,
  ip: string,
  port: number,
  seconds: number,
  tag: string,
): Promise<{ sent: Promise<number> }> {
  const child = spawn(
    'ip',
    ['netns', 'exec', ns, '/usr/bin/python3', '-c', RUSH, ip, String(port), String(seconds), tag],
    {
      stdio: ['ignore', 'pipe', 'ignore'],
    },
  );
  let out = '';
  let readyResolve: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => {
    readyResolve = resolve;
  });
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    if (out.includes('ready')) readyResolve();
  });
  const sent = new Promise<number>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', () => {
      const n = Number(out.split('\n')[1]);
      if (Number.isInteger(n)) resolve(n);
      else reject(new Error(`UDP rush from ${ns}: no count in ${JSON.stringify(out)}`));
    });
  });
  await Promise.race([ready, sent]);
  return { sent };
}

const HEARD = `
import socket, sys
ip, port, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
q = socket.socket(socket.AF_INET6 if ':' in ip else socket.AF_INET, socket.SOCK_DGRAM)
q.settimeout(2); q.connect((ip, port)); q.send(b'total' + tag.encode()); print(q.recv(64).decode())
`;

/** How many datagrams tagged `tag` the server at `ip`:`port` heard, asked from namespace `ns`. */
export async function udpHeard(ns: string, ip: string, port: number, tag: string): Promise<number> {
  return Number((await pythonIn(ns, `asking ${ip}:${port}`, HEARD, [ip, String(port), tag])).trim());
}
