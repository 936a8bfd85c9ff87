/**
 * The NetworkPolicy model test on a real datapath (issue 28): a fixed grid of real pods (three
 * namespaces of two labelled pods, dual-stack, added through the real relay, each listening on TCP
 * and UDP ports with some named container ports) and one namespace outside the pod CIDRs standing for
 * an external host; random policies over that grid (fast-check, seeded); the expected reachability
 * matrix from the independent oracle (`test/policy/policy-oracle.ts`, no code shared with
 * `src/policy/`); the policies compiled (`src/policy/compile.ts`) and applied through the datapath's
 * real backend; and the whole matrix probed: every ordered pod pair and the external host both ways,
 * TCP and UDP, IPv4 and IPv6, every listening port, all at once (one client process per source, each
 * probe a new connection from a source port of its own).
 *
 * Replay: each case has its own seed (the run's seed plus its index) and a failure prints
 * `PODWIRE_POLICY_MODEL_SEED=... PODWIRE_POLICY_MODEL_CASES=1`, which runs exactly that case first.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import type { TestContext } from 'node:test';
import fc from 'fast-check';
import { must } from '../../bed/exec.js';
import { resultIps, type TestNode } from '../../bed/node.js';
import { parseIpOrThrow, prefixOf } from '../../src/base/ip.js';
import type { PolicyBackend } from '../../src/datapath/policy-backend.js';
import { compilePolicies } from '../../src/policy/compile.js';
import type {
  ContainerPort,
  IpBlock,
  LabelSelector,
  Namespace,
  NetworkPolicy,
  Pod,
  PolicyPeer,
  PolicyPort,
  PolicyRule,
  Protocol,
} from '../../src/policy/model.js';
import { labelSelectorArbitrary } from '../policy/label-selector-arbitrary.js';
import { allowedEgress, allowedIngress, inCidr, type World } from '../policy/policy-oracle.js';
import { ProbeServers } from './policy-probe.js';

/** The pods' node, as the compiler sees it. */
const NODE = 'model-node';
/** The ports every grid pod (and the external host) listens on, TCP and UDP, both families. */
export const MODEL_PORTS = [80, 81, 8080] as const;
/** Port numbers a policy may name: the listening ones and one that nobody listens on. */
const POLICY_NUMBERS = [80, 81, 8080, 9];
const PORT_NAMES = ['http', 'dns', 'metrics'];
const POD_KEYS = ['app', 'tier'];
const NS_KEYS = ['team'];
const VALUES = ['x', 'y'];

/** Pod CIDRs of the grid's node and the external host's addresses: a /23 (/63) holds both. */
export const MODEL_POD_CIDRS = ['10.244.61.0/24', 'fd00:10:244:61::/64'];
const EXTERNAL = { v4: '10.244.60.2', v6: 'fd00:10:244:60::2', gw4: '10.244.60.1', gw6: 'fd00:10:244:60::1' };

export const MODEL_NAMESPACES: Namespace[] = [
  { name: 'a', labels: { team: 'x' } },
  { name: 'b', labels: { team: 'y' } },
  { name: 'c', labels: {} },
];

const tcp = (name: string, containerPort: number): ContainerPort => ({
  name,
  containerPort,
  protocol: 'TCP',
});
const udp = (name: string, containerPort: number): ContainerPort => ({
  name,
  containerPort,
  protocol: 'UDP',
});

/** The grid: labels and container ports chosen so that selectors and named ports tell pods apart. */
export const MODEL_GRID: Array<Omit<Pod, 'ips' | 'hostNetwork' | 'node'>> = [
  { namespace: 'a', name: 'p1', labels: { app: 'x', tier: 'x' }, ports: [tcp('http', 80), udp('dns', 81)] },
  { namespace: 'a', name: 'p2', labels: { app: 'y' }, ports: [tcp('http', 8080), udp('dns', 80)] },
  { namespace: 'b', name: 'p1', labels: { app: 'x' }, ports: [tcp('http', 81), tcp('metrics', 8080)] },
  { namespace: 'b', name: 'p2', labels: { tier: 'y' }, ports: [udp('metrics', 8080)] },
  { namespace: 'c', name: 'p1', labels: { app: 'x', tier: 'y' }, ports: [udp('dns', 8080), tcp('http', 81)] },
  { namespace: 'c', name: 'p2', labels: {}, ports: [] },
];

interface GridPod {
  pod: Pod;
  /** The pod's network namespace. */
  netns: string;
}

type ProbeProto = 'tcp' | 'udp';
interface Probe {
  from: string;
  proto: ProbeProto;
  ip: string;
  port: number;
  expected: boolean;
  what: string;
}

// --- The generator. ---

/** A third of them empty (every pod, every namespace), as policies are often written. */
const selector = (keys: string[]): fc.Arbitrary<LabelSelector> =>
  fc.oneof(
    { weight: 1, arbitrary: fc.constant<LabelSelector>({ matchLabels: {}, matchExpressions: [] }) },
    { weight: 2, arbitrary: someSelector(keys) },
  );

const someSelector = (keys: string[]): fc.Arbitrary<LabelSelector> => labelSelectorArbitrary(keys, VALUES);

const LENGTHS = { 4: [0, 16, 23, 24, 28, 29, 30, 31, 32], 6: [0, 48, 63, 64, 120, 124, 126, 127, 128] };

const mask = (ip: string, length: number): string => prefixOf(parseIpOrThrow(ip), length).text;

/** A block around one of the grid's addresses (or the external host's), with excepts inside it around others. */
function ipBlock(addresses: { 4: string[]; 6: string[] }): fc.Arbitrary<IpBlock> {
  return fc.constantFrom(4 as const, 6 as const).chain((family) =>
    fc
      .tuple(fc.constantFrom(...addresses[family]), fc.constantFrom(...LENGTHS[family]))
      .chain(([anchor, length]) => {
        const cidr = mask(anchor, length);
        const inside = addresses[family].filter((a) => inCidr(a, cidr));
        const longer = LENGTHS[family].filter((l) => l > length);
        if (longer.length === 0) return fc.constant({ cidr, except: [] });
        return fc
          .array(
            fc.tuple(fc.constantFrom(...inside), fc.constantFrom(...longer)).map(([a, l]) => mask(a, l)),
            { maxLength: 2 },
          )
          .map((except) => ({ cidr, except: [...new Set(except)] }));
      }),
  );
}

const protocol = fc.constantFrom<Protocol>('TCP', 'TCP', 'UDP', 'UDP', 'SCTP');

const port: fc.Arbitrary<PolicyPort> = fc.oneof(
  { weight: 1, arbitrary: fc.record({ protocol }) },
  { weight: 3, arbitrary: fc.record({ protocol, port: fc.constantFrom(...POLICY_NUMBERS) }) },
  {
    weight: 1,
    arbitrary: fc
      .record({ protocol, port: fc.constantFrom(80, 81), end: fc.constantFrom(81, 8080, 9000) })
      .map(({ protocol, port, end }) => ({ protocol, port, endPort: Math.max(port, end) })),
  },
  { weight: 3, arbitrary: fc.record({ protocol, port: fc.constantFrom(...PORT_NAMES) }) },
);

/** Random policies (one to four) over the grid; `addresses`: the grid's and the external host's, per family. */
export function modelPolicies(addresses: { 4: string[]; 6: string[] }): fc.Arbitrary<NetworkPolicy[]> {
  const peer: fc.Arbitrary<PolicyPeer> = fc.oneof(
    {
      weight: 3,
      arbitrary: fc.record({
        kind: fc.constant('pods' as const),
        podSelector: selector(POD_KEYS),
        namespaceSelector: fc.option(selector(NS_KEYS), { nil: null }),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({ kind: fc.constant('ipBlock' as const), ipBlock: ipBlock(addresses) }),
    },
  );
  const rule: fc.Arbitrary<PolicyRule> = fc.record({
    peers: fc.option(fc.array(peer, { minLength: 1, maxLength: 3 }), { nil: null, freq: 4 }),
    ports: fc.option(fc.array(port, { minLength: 1, maxLength: 3 }), { nil: null, freq: 3 }),
  });
  const policy = (i: number): fc.Arbitrary<NetworkPolicy> =>
    fc
      .record({
        namespace: fc.constantFrom(...MODEL_NAMESPACES.map((n) => n.name)),
        podSelector: selector(POD_KEYS),
        types: fc.constantFrom(['Ingress'], ['Egress'], ['Ingress', 'Egress']) as fc.Arbitrary<
          Array<'Ingress' | 'Egress'>
        >,
        ingress: fc.array(rule, { maxLength: 3 }),
        egress: fc.array(rule, { maxLength: 3 }),
      })
      .map((p) => ({
        namespace: p.namespace,
        name: `p${i}`,
        podSelector: p.podSelector,
        policyTypes: p.types,
        ingress: p.types.includes('Ingress') ? p.ingress : [],
        egress: p.types.includes('Egress') ? p.egress : [],
      }));
  return fc
    .integer({ min: 1, max: 4 })
    .chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => policy(i))));
}

// --- The probe client: every probe of one source at once. ---

/**
 * One client per source, started once: each line on stdin is a round, JSON {probes: [[proto, ip,
 * port], ...], base, wait}, answered by one line JSON [true|false, ...]: whether each probe's echo came
 * back within `wait` seconds. Each probe binds its own source port (base + index: never one an earlier
 * round used, so no connection-tracking entry of an earlier case can pass it), TCP connects without
 * blocking and sends once connected, UDP sends every 0.2 s until answered; a round ends as soon as
 * every probe is answered.
 */
const CLIENT = `
import json, selectors, socket, sys, time
def round(probes, base, wait):
    sel = selectors.DefaultSelector()
    ok = [False] * len(probes)
    udp = {}
    for i, (proto, ip, port) in enumerate(probes):
        fam = socket.AF_INET6 if ':' in ip else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_STREAM if proto == 'tcp' else socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(('::' if fam == socket.AF_INET6 else '0.0.0.0', base + i))
        s.setblocking(False)
        if proto == 'tcp':
            s.connect_ex((ip, port))
            sel.register(s, selectors.EVENT_WRITE, (i, True))
        else:
            s.connect((ip, port))
            udp[i] = s
            sel.register(s, selectors.EVENT_READ, (i, False))
    def done(s, i):
        sel.unregister(s); s.close(); udp.pop(i, None)
    end = time.monotonic() + wait
    resend = 0.0
    while sel.get_map():
        now = time.monotonic()
        if now >= end: break
        if now >= resend:
            for s in udp.values():
                try: s.send(b'podwire')
                except OSError: pass
            resend = now + 0.2
        for key, _ in sel.select(timeout=max(0.0, min(resend, end) - now)):
            s = key.fileobj; i, connecting = key.data
            if connecting:
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0: done(s, i); continue
                try: s.send(b'podwire')
                except OSError: done(s, i); continue
                sel.modify(s, selectors.EVENT_READ, (i, False))
                continue
            try: d = s.recv(64)
            except BlockingIOError: continue
            except OSError:
                if i not in udp: done(s, i)
                continue
            if d == b'podwire': ok[i] = True
            if d == b'podwire' or i not in udp: done(s, i)
    for key in list(sel.get_map().values()): key.fileobj.close()
    sel.close()
    return ok
print('ready', flush=True)
for line in sys.stdin:
    r = json.loads(line)
    print(json.dumps(round(r['probes'], r['base'], r['wait'])), flush=True)
`;

/** A probe client running in one namespace until `stop`. */
class ProbeClient {
  readonly #child: ChildProcess;
  readonly #exited: Promise<unknown>;
  readonly #lines: string[] = [];
  #waiting: ((line: string | undefined) => void) | undefined;
  #buffer = '';
  #stderr = '';
  readonly netns: string;

  constructor(netns: string) {
    this.netns = netns;
    this.#child = spawn('ip', ['netns', 'exec', netns, '/usr/bin/python3', '-c', CLIENT], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.#exited = new Promise((resolve) => this.#child.once('close', resolve)).then(() =>
      this.#deliver(undefined),
    );
    this.#child.stdout?.on('data', (d: Buffer) => {
      this.#buffer += d.toString();
      for (let n = this.#buffer.indexOf('\n'); n >= 0; n = this.#buffer.indexOf('\n')) {
        this.#deliver(this.#buffer.slice(0, n));
        this.#buffer = this.#buffer.slice(n + 1);
      }
    });
    this.#child.stderr?.on('data', (d: Buffer) => {
      this.#stderr += d.toString();
    });
  }

  #deliver(line: string | undefined): void {
    const waiting = this.#waiting;
    this.#waiting = undefined;
    if (waiting) waiting(line);
    else if (line !== undefined) this.#lines.push(line);
  }

  /** The next line it prints; an error if it exits first. */
  async #line(): Promise<string> {
    const queued = this.#lines.shift();
    if (queued !== undefined) return queued;
    if (this.#child.exitCode !== null || this.#child.signalCode !== null)
      throw new Error(`probe client in ${this.netns} exited: ${this.#stderr}`);
    const line = await new Promise<string | undefined>((resolve) => {
      this.#waiting = resolve;
    });
    if (line === undefined) throw new Error(`probe client in ${this.netns} exited: ${this.#stderr}`);
    return line;
  }

  async ready(): Promise<void> {
    assert.equal(await this.#line(), 'ready');
  }

  /** One round: whether each probe was answered. */
  async probe(probes: readonly Probe[], base: number, wait: number): Promise<boolean[]> {
    if (probes.length === 0) return [];
    const request = { probes: probes.map((p) => [p.proto, p.ip, p.port]), base, wait };
    this.#child.stdin?.write(`${JSON.stringify(request)}\n`);
    const out = JSON.parse(await this.#line()) as boolean[];
    assert.equal(out.length, probes.length);
    return out;
  }

  async stop(): Promise<void> {
    if (this.#child.exitCode === null && this.#child.signalCode === null) this.#child.kill('SIGKILL');
    await this.#exited;
  }
}

/** Source ports: 80 per source and probe round (each source has at most 6 x 12 probes), 10000-59999. */
const SLOT = 80;
const SLOTS = 50_000 / SLOT;
const sourcePort = (slot: number) => 10_000 + (((slot % SLOTS) + SLOTS) % SLOTS) * SLOT;

// --- The grid and the run. ---

export interface ModelFigures {
  cases: number;
  seconds: number;
  probes: number;
  allowed: number;
  denied: number;
  /** Allowed probes that were answered only on the second, slower try. */
  retried: number;
  /** Of `seconds`, the time spent in the backend's apply. */
  applySeconds: number;
}

export class PolicyModelGrid {
  readonly #node: TestNode;
  readonly #servers = new ProbeServers();
  readonly #clients = new Map<string, ProbeClient>();
  readonly pods: GridPod[] = [];
  external = '';

  constructor(node: TestNode) {
    this.#node = node;
  }

  /** Adds the grid's pods through the relay, the external host behind the node, and starts the servers. */
  async setup(): Promise<void> {
    const node = this.#node;
    for (const [i, g] of MODEL_GRID.entries()) {
      const netns = await node.addPod(`m${g.namespace}${g.name}`);
      const add = await node.cni({ command: 'ADD', containerId: `model-${i}`, netns });
      assert.equal(add.code, 0, add.stdout);
      const ips = resultIps(add);
      assert.equal(ips.length, 2, `dual-stack pod: ${add.stdout}`);
      this.pods.push({ netns, pod: { ...g, ips, hostNetwork: false, node: NODE } });
    }
    // The external host: a namespace routed from the node, outside the pod CIDRs.
    const x = await node.ns.add('mext');
    this.external = x;
    const sh = (ns: string, ...cmd: string[]) => must('ip', ['netns', 'exec', ns, ...cmd]);
    await sh(node.nodeNs, 'sysctl', '-qw', 'net.ipv4.ip_forward=1', 'net.ipv6.conf.all.forwarding=1');
    await sh(node.nodeNs, 'ip', 'link', 'add', 'mext0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', x);
    await sh(node.nodeNs, 'ip', 'addr', 'add', `${EXTERNAL.gw4}/24`, 'dev', 'mext0');
    await sh(node.nodeNs, 'ip', 'addr', 'add', `${EXTERNAL.gw6}/64`, 'dev', 'mext0', 'nodad');
    await sh(node.nodeNs, 'ip', 'link', 'set', 'mext0', 'up');
    await sh(x, 'ip', 'addr', 'add', `${EXTERNAL.v4}/24`, 'dev', 'eth0');
    await sh(x, 'ip', 'addr', 'add', `${EXTERNAL.v6}/64`, 'dev', 'eth0', 'nodad');
    await sh(x, 'ip', 'link', 'set', 'eth0', 'up');
    await sh(x, 'ip', 'link', 'set', 'lo', 'up');
    await sh(x, 'ip', 'route', 'add', MODEL_POD_CIDRS[0] as string, 'via', EXTERNAL.gw4);
    await sh(x, 'ip', '-6', 'route', 'add', MODEL_POD_CIDRS[1] as string, 'via', EXTERNAL.gw6);
    const sources = [...this.pods.map((p) => p.netns), x];
    await this.#servers.start(sources, MODEL_PORTS);
    for (const netns of sources) this.#clients.set(netns, new ProbeClient(netns));
    await Promise.all([...this.#clients.values()].map((c) => c.ready()));
  }

  async stop(): Promise<void> {
    await Promise.all([...this.#clients.values()].map((c) => c.stop()));
    await this.#servers.stop();
  }

  /** The node's own addresses: the gateway's (the first of each pod CIDR) and the external link's. */
  get nodeIps(): string[] {
    return ['10.244.61.1', 'fd00:10:244:61::1', EXTERNAL.gw4, EXTERNAL.gw6];
  }

  /** Every probe of the matrix with the oracle's verdict for `w`. */
  #matrix(w: World): Probe[] {
    const out: Probe[] = [];
    const ext = [EXTERNAL.v4, EXTERNAL.v6];
    const name = (p: Pod) => `${p.namespace}/${p.name}`;
    for (const src of this.pods) {
      for (const dst of this.pods) {
        if (dst === src) continue;
        for (const [f, ip] of dst.pod.ips.entries()) {
          const srcIp = src.pod.ips[f] as string;
          for (const proto of ['tcp', 'udp'] as const)
            for (const port of MODEL_PORTS) {
              const P = proto === 'tcp' ? 'TCP' : 'UDP';
              out.push({
                from: src.netns,
                proto,
                ip,
                port,
                expected:
                  allowedEgress(w, src.pod, ip, P, port) && allowedIngress(w, srcIp, dst.pod, P, port),
                what: `${name(src.pod)} -> ${name(dst.pod)} ${proto} [${ip}]:${port}`,
              });
            }
        }
      }
      for (const ip of ext)
        for (const proto of ['tcp', 'udp'] as const)
          for (const port of MODEL_PORTS)
            out.push({
              from: src.netns,
              proto,
              ip,
              port,
              expected: allowedEgress(w, src.pod, ip, proto === 'tcp' ? 'TCP' : 'UDP', port),
              what: `${name(src.pod)} -> external ${proto} [${ip}]:${port}`,
            });
    }
    for (const dst of this.pods)
      for (const [f, ip] of dst.pod.ips.entries())
        for (const proto of ['tcp', 'udp'] as const)
          for (const port of MODEL_PORTS)
            out.push({
              from: this.external,
              proto,
              ip,
              port,
              expected: allowedIngress(w, ext[f] as string, dst.pod, proto === 'tcp' ? 'TCP' : 'UDP', port),
              what: `external -> ${name(dst.pod)} ${proto} [${ip}]:${port}`,
            });
    return out;
  }

  /** Probes `probes` from their sources, all at once; each source's ports from `slot`. */
  async #probe(probes: Probe[], slot: number, wait: number): Promise<boolean[]> {
    const bySource = new Map<string, number[]>();
    for (const [i, p] of probes.entries()) bySource.set(p.from, [...(bySource.get(p.from) ?? []), i]);
    const got = Array<boolean>(probes.length).fill(false);
    await Promise.all(
      [...bySource].map(async ([netns, idx]) => {
        const client = this.#clients.get(netns) as ProbeClient;
        const answers = await client.probe(
          idx.map((i) => probes[i] as Probe),
          sourcePort(slot),
          wait,
        );
        for (const [k, i] of idx.entries()) got[i] = answers[k] as boolean;
      }),
    );
    return got;
  }

  /**
   * Runs `cases` generated cases from `seed` through `backend`; fails at the first case whose probed
   * matrix differs from the oracle's, naming the seed that replays it.
   */
  async run(t: TestContext, backend: PolicyBackend, seed: number, cases: number): Promise<ModelFigures> {
    const addresses = {
      4: [...this.pods.map((p) => p.pod.ips[0] as string), EXTERNAL.v4],
      6: [...this.pods.map((p) => p.pod.ips[1] as string), EXTERNAL.v6],
    };
    const generator = modelPolicies(addresses);
    const figures: ModelFigures = {
      cases: 0,
      seconds: 0,
      probes: 0,
      allowed: 0,
      denied: 0,
      retried: 0,
      applySeconds: 0,
    };
    const t0 = performance.now();
    for (let i = 0; i < cases; i++) {
      const caseSeed = (seed + i) | 0;
      const [generated] = fc.sample(generator, { seed: caseSeed, numRuns: 1 });
      const w: World = {
        namespaces: MODEL_NAMESPACES,
        pods: this.pods.map((p) => p.pod),
        policies: generated as NetworkPolicy[],
      };
      const replay = `case ${i} of seed ${seed}: replay with PODWIRE_POLICY_MODEL_SEED=${caseSeed} PODWIRE_POLICY_MODEL_CASES=1 (this case alone) or PODWIRE_POLICY_MODEL_SEED=${seed} PODWIRE_POLICY_MODEL_CASES=${i + 1} (with the cases before it)`;
      const tA = performance.now();
      await backend.apply(compilePolicies({ ...w, node: NODE }));
      const tB = performance.now();
      const probes = this.#matrix(w);
      const got = await this.#probe(probes, 2 * caseSeed, 0.6);
      figures.applySeconds += (tB - tA) / 1000;
      // An allowed probe not answered within a second, on a busy machine: once more, slower.
      const late = probes.flatMap((p, k) => (p.expected && !got[k] ? [k] : []));
      if (late.length > 0) {
        const again = await this.#probe(
          late.map((k) => probes[k] as Probe),
          2 * caseSeed + 1,
          3.0,
        );
        for (const [j, k] of late.entries())
          if (again[j]) {
            got[k] = true;
            figures.retried++;
          }
      }
      const differ = probes.flatMap((p, k) => (p.expected === got[k] ? [] : [p]));
      if (differ.length > 0) {
        // A third try of each, from ports no other round of this case used: a difference that
        // persists, or one that went away (a loss, or a conntrack entry of an earlier case).
        const third = await this.#probe(differ, 2 * caseSeed + SLOTS / 2 + 1, 3.0);
        const wrong = differ.map(
          (p, j) =>
            `${p.what}: ${p.expected ? 'allowed but not answered' : 'denied but answered'} (a third try: ${third[j] ? 'answered' : 'not answered'})`,
        );
        assert.fail(
          `${replay}\n${wrong.length} of ${probes.length} probes differ from the oracle:\n  ${wrong
            .slice(0, 40)
            .join('\n  ')}\npolicies: ${JSON.stringify(w.policies)}`,
        );
      }
      figures.cases++;
      figures.probes += probes.length;
      for (const p of probes) figures[p.expected ? 'allowed' : 'denied']++;
    }
    figures.seconds = (performance.now() - t0) / 1000;
    t.diagnostic(
      `seed ${seed}: ${figures.cases} cases, ${figures.probes} probes (${figures.allowed} answered, ${figures.denied} dropped, ${figures.retried} answered only on the slower retry), ${figures.seconds.toFixed(1)} s (${figures.applySeconds.toFixed(1)} s applying), ${(figures.seconds / Math.max(1, figures.cases)).toFixed(2)} s per case`,
    );
    return figures;
  }
}

/** The run's seed and case count from the environment (PODWIRE_POLICY_MODEL_SEED, _CASES). */
export function modelRunParameters(defaultCases: number): { seed: number; cases: number } {
  const seedText = process.env.PODWIRE_POLICY_MODEL_SEED;
  const casesText = process.env.PODWIRE_POLICY_MODEL_CASES;
  const seed = seedText === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(seedText);
  const cases = casesText === undefined ? defaultCases : Number(casesText);
  if (!Number.isInteger(seed)) throw new Error(`PODWIRE_POLICY_MODEL_SEED: not an integer: ${seedText}`);
  if (!Number.isInteger(cases) || cases < 1)
    throw new Error(`PODWIRE_POLICY_MODEL_CASES: not a positive integer: ${casesText}`);
  return { seed, cases };
}
