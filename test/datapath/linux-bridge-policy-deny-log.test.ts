/**
 * Denied NetworkPolicy packets logged (issue 28, decision 51), on the Linux bridge's real datapath in
 * throwaway namespaces: the nftables backend's deny chains (NFLOG under a kernel rate limit, then
 * drop), the nfnetlink_log socket, and the agent's `DenyLogger` with its own limit. Three pods on one
 * bridge with br_netfilter (A, B, C); `PodPolicy` values made by hand, as the controller would apply.
 * Every packet is sent from inside a namespace the test made.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { must, run } from '../../bed/exec.js';
import { NamespaceSet, netnsPath } from '../../bed/namespaces.js';
import { jsonLogger } from '../../src/agent/log.js';
import { DenyLogger, NO_RULE_ALLOWS } from '../../src/agent/policy/deny-logger.js';
import { NftPolicyBackend } from '../../src/datapath/linux-bridge/nft-policy-backend.js';
import { DENY_LOG_BURST, DENY_LOG_RATE } from '../../src/datapath/linux-bridge/policy-table.js';
import { NfTables } from '../../src/kernel/netlink/nf-tables.js';
import { NflogSocket } from '../../src/kernel/netlink/nflog-socket.js';
import { inNetns, NetnsHandle } from '../../src/kernel/netns.js';
import { nftIn } from '../../src/kernel/nft.js';
import type { PodPolicy } from '../../src/policy/model.js';
import { ProbeServers, probeFrom } from './policy-probe.js';

const A = { v4: '10.92.0.2', v6: 'fd00:92::2' };
const B = { v4: '10.92.0.3', v6: 'fd00:92::3' };
const C = { v4: '10.92.0.4', v6: 'fd00:92::4' };
const PORTS = [7000, 7001];

const pod = (name: string, ips: { v4: string; v6: string }, p: Partial<PodPolicy> = {}): PodPolicy => ({
  namespace: 'ns',
  name,
  ips: [ips.v4, ips.v6],
  ingress: null,
  egress: null,
  ...p,
});

/** C isolated for ingress by two policies, B for egress by one; nothing allowed. */
const APPLIED: PodPolicy[] = [
  pod('a', A),
  pod('b', B, { egress: { policies: ['ns/b-out'], rules: [] } }),
  pod('c', C, { ingress: { policies: ['ns/c-in', 'ns/c-in-too'], rules: [] } }),
];

/** `count` UDP datagrams to `ip`:`port` from namespace `ns`, as fast as Python sends; prints the count sent. */
const FLOOD = `
import socket, sys
ip, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET6 if ':' in ip else socket.AF_INET, socket.SOCK_DGRAM)
sent = 0
for i in range(count):
    try:
        s.sendto(b'countflood', (ip, port)); sent += 1
    except OSError:
        pass
print(sent)
`;

interface Line {
  msg: string;
  [k: string]: unknown;
}

describe('denied NetworkPolicy packets logged (Linux bridge)', () => {
  const spaces = new NamespaceSet();
  const servers = new ProbeServers();
  const handles: NetnsHandle[] = [];
  let nf: NfTables | undefined;
  let backend: NftPolicyBackend;
  let node = '';
  const ns: Record<string, string> = {};
  let home: NetnsHandle;
  let nodeHandle: NetnsHandle;

  const sh = (netns: string, ...cmd: string[]) => must('ip', ['netns', 'exec', netns, ...cmd]);

  before(async () => {
    node = await spaces.add('dnode');
    for (const name of ['a', 'b', 'c']) ns[name] = await spaces.add(`d${name}`);
    await sh(
      node,
      'sysctl',
      '-qw',
      'net.bridge.bridge-nf-call-iptables=1',
      'net.bridge.bridge-nf-call-ip6tables=1',
    );
    await sh(node, 'ip', 'link', 'add', 'br0', 'type', 'bridge');
    await sh(node, 'ip', 'addr', 'add', '10.92.0.1/24', 'dev', 'br0');
    await sh(node, 'ip', 'addr', 'add', 'fd00:92::1/64', 'dev', 'br0', 'nodad');
    await sh(node, 'ip', 'link', 'set', 'br0', 'up');
    for (const [name, ips] of [
      ['a', A],
      ['b', B],
      ['c', C],
    ] as const) {
      const p = ns[name] as string;
      await sh(node, 'ip', 'link', 'add', `v${name}`, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', p);
      await sh(node, 'ip', 'link', 'set', `v${name}`, 'master', 'br0', 'up');
      await sh(p, 'ip', 'addr', 'add', `${ips.v4}/24`, 'dev', 'eth0');
      await sh(p, 'ip', 'addr', 'add', `${ips.v6}/64`, 'dev', 'eth0', 'nodad');
      await sh(p, 'ip', 'link', 'set', 'eth0', 'up');
      await sh(p, 'ip', 'link', 'set', 'lo', 'up');
    }
    await servers.start([ns.a, ns.b, ns.c] as string[], PORTS);
    home = NetnsHandle.current();
    nodeHandle = NetnsHandle.open(netnsPath(node));
    handles.push(home, nodeHandle);
    nf = inNetns(nodeHandle, home, () => NfTables.open());
    backend = new NftPolicyBackend(nftIn(node), nf, {
      openNflog: (bind) => inNetns(nodeHandle, home, () => NflogSocket.open(bind)),
    });
    await backend.start();
    await backend.apply(APPLIED);
  });

  after(async () => {
    await servers.stop();
    await backend?.remove().catch(() => undefined);
    nf?.close();
    for (const h of handles) h.close();
    await spaces.cleanup();
  });

  /** A deny logger on a fresh deny log; its lines, parsed. */
  function logger(opts: { rate?: number; burst?: number } = {}): { denied: DenyLogger; lines: Line[] } {
    const lines: Line[] = [];
    const log = jsonLogger((l) => lines.push(JSON.parse(l) as Line));
    const denied = new DenyLogger({
      source: backend.openDenyLog(),
      applied: () => APPLIED,
      log,
      intervalMs: 50,
      ...opts,
    });
    return { denied, lines };
  }

  /** Reads until `done` holds, or 15 s have passed (then the assertions after it say what is missing). */
  async function readUntil(denied: DenyLogger, done: () => boolean): Promise<void> {
    for (let i = 0; i < 150 && !done(); i++) {
      denied.poll();
      await sleep(100);
    }
    denied.poll();
  }

  const deniedCount = async (podName: string, direction: string): Promise<bigint> =>
    (await backend.counters()).find((c) => c.rule === `ns/${podName}/${direction}/deny`)?.packets ?? 0n;

  // Depends on the deny chains' `log ... group` rule (policy-table.ts chainOf) and on the reader.
  test('a denied TCP connection attempt and a denied UDP datagram: pod, direction, addresses, port, policies', async () => {
    const { denied, lines } = logger();
    try {
      // A to C's TCP 7000: C's ingress isolation; B's UDP to A 7001 over IPv6: B's egress isolation.
      assert.deepEqual(await probeFrom(ns.a as string, [['tcp', C.v4, 7000]]), [false]);
      assert.deepEqual(await probeFrom(ns.b as string, [['udp', A.v6, 7001]]), [false]);
      const tcp = (l: Line) => l.msg === 'policy-denied' && l.protocol === 'TCP';
      const udp = (l: Line) => l.msg === 'policy-denied' && l.protocol === 'UDP';
      await readUntil(denied, () => lines.some(tcp) && lines.some(udp));
      const t = lines.find(tcp);
      const u = lines.find(udp);
      assert.ok(t && u, `both logged: ${JSON.stringify(lines)}`);
      assert.deepEqual(
        { ...t, time: undefined, level: undefined },
        {
          time: undefined,
          level: undefined,
          msg: 'policy-denied',
          pod: 'ns/c',
          direction: 'ingress',
          src: A.v4,
          dst: C.v4,
          protocol: 'TCP',
          port: 7000,
          policies: ['ns/c-in', 'ns/c-in-too'],
          reason: NO_RULE_ALLOWS,
        },
      );
      assert.deepEqual(
        { ...u, time: undefined, level: undefined },
        {
          time: undefined,
          level: undefined,
          msg: 'policy-denied',
          pod: 'ns/b',
          direction: 'egress',
          src: B.v6,
          dst: A.v6,
          protocol: 'UDP',
          port: 7001,
          policies: ['ns/b-out'],
          reason: NO_RULE_ALLOWS,
        },
      );
    } finally {
      denied.stop();
    }
  });

  test('a flood: every packet dropped and counted once, lines within both limits, the rest a suppressed count', async (t) => {
    // The agent's limit below the kernel's, so that both show: the kernel passes at most its burst plus
    // its rate per second to the agent, the agent writes at most its own and counts the rest.
    const { denied, lines } = logger({ rate: 2, burst: 5 });
    const before = await deniedCount('c', 'ingress');
    const t0 = performance.now();
    denied.start();
    const r = await run('ip', [
      'netns',
      'exec',
      ns.a as string,
      '/usr/bin/python3',
      '-c',
      FLOOD,
      C.v4,
      '7000',
      '5000',
    ]);
    assert.equal(r.code, 0, r.stderr);
    const sent = Number(r.stdout.trim());
    await sleep(300);
    denied.stop();
    const seconds = (performance.now() - t0) / 1000;
    const counted = (await deniedCount('c', 'ingress')) - before;
    assert.ok(sent >= 4900, `the flood sent ${sent}`);
    assert.equal(counted, BigInt(sent), 'each denied packet counted exactly once');
    // The server counts what it hears tagged `flood`; the node (whose own packets policy does not
    // judge) asks it: it answers, and heard none.
    const heard = (
      await must('ip', [
        'netns',
        'exec',
        node,
        '/usr/bin/python3',
        '-c',
        `import socket\nq = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); q.settimeout(2)\nq.connect(('${C.v4}', 7000)); q.send(b'totalflood'); print(q.recv(64).decode())`,
      ])
    ).trim();
    assert.equal(heard, '0', 'no flood datagram reached C');
    const logged = lines.filter((l) => l.msg === 'policy-denied');
    const suppressed = lines.reduce((n, l) => n + (typeof l.suppressed === 'number' ? l.suppressed : 0), 0);
    const stats = denied.stats;
    assert.equal(logged.length, stats.lines);
    assert.equal(suppressed, stats.suppressed, 'every suppressed packet reported in a line');
    const read = stats.lines + stats.suppressed;
    const kernelBound = DENY_LOG_BURST + Math.ceil(DENY_LOG_RATE * seconds) + 1;
    assert.ok(
      read <= kernelBound,
      `the kernel let ${read} through in ${seconds.toFixed(1)} s (bound ${kernelBound})`,
    );
    assert.ok(read >= DENY_LOG_BURST, `the kernel's burst reached the agent: ${read}`);
    const agentBound = 5 + Math.ceil(2 * seconds) + 1;
    assert.ok(
      stats.lines <= agentBound,
      `${stats.lines} lines in ${seconds.toFixed(1)} s (bound ${agentBound})`,
    );
    assert.ok(stats.suppressed > 0, 'the agent suppressed some and said how many');
    assert.ok(logged.every((l) => l.pod === 'ns/c' && l.src === A.v4 && l.port === 7000));
    t.diagnostic(
      `sent ${sent}, counted ${counted}, heard ${heard}; the kernel passed ${read} in ${seconds.toFixed(1)} s; ${stats.lines} lines, ${stats.suppressed} suppressed`,
    );
  });
});
