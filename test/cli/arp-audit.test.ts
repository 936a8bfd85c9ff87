/**
 * `podwire arp audit` on the underlay of a two-node etcd cluster: identities come from node-0's agent
 * (its own uplink, and node-1's uplink MAC from node-1's record in the store). Ordinary traffic
 * between the nodes is clean (exit 0, node IPs "ok"); a forged ARP that pairs node-1's IP with another
 * MAC, sent onto the underlay, is reported (exit 1, WRONG-MAC naming node-1's uplink); an audit that
 * cannot run exits 2.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startArpAudit } from '../../bed/arp-audit-run.js';
import { TestCluster } from '../../bed/cluster.js';
import { ipJson, must, type Run, run } from '../../bed/exec.js';
import { netnsPath } from '../../bed/namespaces.js';
import { ROOT } from '../../bed/node.js';
import { UNDERLAY_BRIDGE } from '../../bed/underlay.js';
import { controlSocketPath } from '../../src/agent/ops/control-server.js';
import { gratuitousArp } from '../../src/arp/arp-frame.js';
import type { AuditReport } from '../../src/arp/audit.js';
import { inNetns, NetnsHandle } from '../../src/kernel/netns.js';
import { PacketSocket } from '../../src/kernel/packet-socket.js';

const CLI = `${ROOT}/bin/podwire`;
const FORGED_MAC = '02:de:ad:be:ef:01';
const cluster = new TestCluster({ nodes: 2, store: 'etcd', trafficMode: 'noEncap' });

/**
 * Runs the audit; resolves `ready` once the capture socket is open (the CLI says so on stderr), so the
 * traffic a test makes afterwards is inside the capture however slowly the CLI started.
 */
function startAudit(args: string[]): { ready: Promise<void>; done: Promise<Run> } {
  return startArpAudit(cluster.underlay.ns, args);
}

function audit(seconds: number, json = true) {
  const sock = controlSocketPath(cluster.members[0]?.node.socket as string);
  return startAudit([
    '--interface',
    UNDERLAY_BRIDGE,
    '--seconds',
    String(seconds),
    ...(json ? ['--json'] : []),
    '--socket',
    sock,
  ]);
}

async function uplinkMac(ns: string): Promise<string> {
  const [l] = await ipJson<Array<{ address: string }>>(ns, ['link', 'show', 'eth0']);
  return l?.address ?? '';
}

/** node-1 forgets node-0 and pings it: both nodes ARP on the underlay. */
async function nodesTalk(): Promise<void> {
  const [a, b] = cluster.members;
  if (!a || !b) throw new Error('two nodes');
  await must('ip', ['-n', b.underlay.ns, 'neigh', 'flush', 'dev', 'eth0']);
  await must('ip', [
    'netns',
    'exec',
    b.underlay.ns,
    'ping',
    '-c',
    '2',
    '-i',
    '0.2',
    '-W',
    '1',
    a.underlay.ip,
  ]);
}

before(async () => {
  await cluster.setup();
  // node-0 learns node-1's record (with its uplink MAC) from the store's watch.
  const sock = controlSocketPath(cluster.members[0]?.node.socket as string);
  const deadline = Date.now() + 10_000;
  for (;;) {
    const r = await run(CLI, ['status', '--json', '--socket', sock]);
    if (
      r.code === 0 &&
      (JSON.parse(r.stdout) as { cluster: { overlay: { peers: string[] } } }).cluster.overlay.peers.length ===
        1
    )
      break;
    if (Date.now() > deadline) throw new Error(`node-0 never saw node-1: ${r.stdout} ${r.stderr}`);
    await sleep(100);
  }
});
after(() => cluster.cleanup());

describe('podwire arp audit', () => {
  test('ordinary traffic between nodes: every node IP is ok, exit 0', async () => {
    const running = audit(3);
    await running.ready;
    await nodesTalk();
    const r = await running.done;
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const report = JSON.parse(r.stdout) as AuditReport;
    const [a, b] = cluster.members;
    for (const m of [a, b]) {
      const row = report.rows.find((x) => x.senderIp === m?.underlay.ip);
      assert.equal(row?.verdict, 'ok', JSON.stringify(report));
      assert.equal(row?.senderMac, await uplinkMac(m?.underlay.ns as string));
    }
  });

  test('an injected leak (node-1 IP with another MAC) is reported, exit 1', async () => {
    const victim = cluster.members[1];
    const running = audit(2);
    await running.ready;
    const [ul] = await ipJson<Array<{ ifindex: number }>>(cluster.underlay.ns, [
      'link',
      'show',
      UNDERLAY_BRIDGE,
    ]);
    {
      using home = NetnsHandle.current();
      using ns = NetnsHandle.open(netnsPath(cluster.underlay.ns));
      using sock = inNetns(ns, home, () => PacketSocket.open(ul?.ifindex ?? 0));
      sock.send(gratuitousArp(FORGED_MAC, victim?.underlay.ip as string));
    }
    const r = await running.done;
    assert.equal(r.code, 1, r.stdout + r.stderr);
    const report = JSON.parse(r.stdout) as AuditReport;
    assert.equal(report.violations.length, 1, JSON.stringify(report.rows));
    const v = report.violations[0];
    assert.equal(v?.verdict, 'WRONG-MAC');
    assert.equal(v?.senderIp, victim?.underlay.ip);
    assert.equal(v?.senderMac, FORGED_MAC);
    assert.equal(v?.expected?.owner, 'node node-1 uplink');
    assert.equal(v?.expected?.mac, await uplinkMac(victim?.underlay.ns as string));
  });

  test('the table has a row per claim; a bad interface is refused', async () => {
    const sock = controlSocketPath(cluster.members[0]?.node.socket as string);
    const running = audit(1.5, false);
    await running.ready;
    await nodesTalk();
    const table = await running.done;
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /^ul0: \d+ ARP\/ND frames in 1.5 s, 0 violation\(s\)/);
    assert.match(table.stdout, /ARP +172\.30\.0\.11 +\S+ +- +\d+ +ok +node node-1 uplink/);
    const bad = await run('ip', [
      'netns',
      'exec',
      cluster.underlay.ns,
      CLI,
      'arp',
      'audit',
      '--interface',
      'nope0',
      '--socket',
      sock,
    ]);
    assert.equal(bad.code, 2, 'an error, not a violation (1)');
    assert.match(bad.stderr, /--interface: no interface nope0/);
  });
});
