/**
 * What an operator meets on a first day with the CLI and the agent's ports (issue 29), each asserted
 * on its message or exit status: `arp audit` tells a violation (1) from an error (2) and names a pod
 * the runtime gave no Kubernetes name by its container ID; `ipam --json` gives sizes and counts as
 * one type, and metrics print the same exact IPv6 range size; an unknown path on the metrics or health
 * port says which paths exist; `--socket` at the CNI socket says that it is the relay's.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startArpAudit } from '../../bed/arp-audit-run.js';
import { must, type Run, run } from '../../bed/exec.js';
import { scrapeMetrics } from '../../bed/metrics.js';
import { netnsPath } from '../../bed/namespaces.js';
import { ROOT, TestNode } from '../../bed/node.js';
import { hostVethName } from '../../src/agent/cni/host-veth.js';
import type { IpamRow } from '../../src/agent/ops/control-methods.js';
import { gratuitousArp } from '../../src/arp/arp-frame.js';
import type { AuditReport } from '../../src/arp/audit.js';
import { inNetns, NetnsHandle } from '../../src/kernel/netns.js';
import { PacketSocket } from '../../src/kernel/packet-socket.js';

const CLI = `${ROOT}/bin/podwire`;
const METRICS_PORT = 19129;
const HEALTH_PORT = 19130;
const V4 = '10.244.31.0/24';
const V6 = 'fd00:10:244:31::/64';
/** A container ID as runtimes make them; ADDed without K8S_POD_* arguments. */
const CONTAINER_ID = '29a0d17c0123456789abcdef0123456789abcdef0123456789abcdef01234567';
const FORGED_MAC = '02:de:ad:be:ef:29';

const node = new TestNode({
  podCIDRs: [V4, V6],
  config: { metricsAddress: `127.0.0.1:${METRICS_PORT}`, healthAddress: `127.0.0.1:${HEALTH_PORT}` },
});
let pod = '';
let podV4 = '';
let gatewayV4 = '';
before(async () => {
  await node.setup();
  pod = await node.addPod('op');
  const add = await node.cni({ command: 'ADD', containerId: CONTAINER_ID, netns: pod });
  assert.equal(add.code, 0, add.stdout);
  const ip = (add.json as { ips: Array<{ address: string; gateway: string }> }).ips.find((i) =>
    i.address.startsWith('10.'),
  );
  podV4 = ip?.address.split('/')[0] as string;
  gatewayV4 = ip?.gateway as string;
});
after(() => node.cleanup());

const cli = (...args: string[]) => run(CLI, [...args, '--config', node.configPath]);

/** `podwire arp audit` on the node's bridge, in the node's namespace; `ready` once it captures. */
function startAudit(args: string[]): { ready: Promise<void>; done: Promise<Run> } {
  return startArpAudit(node.nodeNs, [...args, '--config', node.configPath]);
}

/** The pod ARPs for its gateway: a claim of its own address with its own MAC. */
async function podArps(): Promise<void> {
  await must('ip', ['-n', pod, 'neigh', 'flush', 'dev', 'eth0']);
  await must('ip', ['netns', 'exec', pod, 'ping', '-c', '1', '-W', '1', gatewayV4]);
}

async function httpGet(port: number, path: string): Promise<{ status: number; body: string }> {
  const r = await run('ip', [
    'netns',
    'exec',
    node.nodeNs,
    'curl',
    '-s',
    '-m',
    '5',
    '-w',
    '\n%{http_code}',
    `http://127.0.0.1:${port}${path}`,
  ]);
  const lines = r.stdout.split('\n');
  const status = Number(lines.pop());
  return { status, body: lines.join('\n') };
}

describe('podwire arp audit: exit status and names', () => {
  test('a clean capture: exit 0; a pod without Kubernetes arguments is known by its container ID', async () => {
    const running = startAudit(['--interface', node.options.bridge, '--seconds', '1.5']);
    await running.ready;
    await podArps();
    const r = await running.done;
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(
      r.stdout,
      new RegExp(`^ARP +${podV4.replaceAll('.', '\\.')} +\\S+ +- +\\d+ +ok +pod ${CONTAINER_ID} \\(`, 'm'),
    );
    assert.doesNotMatch(r.stdout, /\["/);
  });

  test('a violation: exit 1', async () => {
    // On the pod's host veth: the capture sees what the pod sends before the bridge's guard drops it.
    const hostVeth = hostVethName(CONTAINER_ID, 'eth0');
    const running = startAudit(['--interface', hostVeth, '--seconds', '1.5', '--json']);
    await running.ready;
    {
      // The pod claims its own address with another MAC.
      const [eth0] = JSON.parse(await must('ip', ['-n', pod, '-j', 'link', 'show', 'eth0'])) as Array<{
        ifindex: number;
      }>;
      using home = NetnsHandle.current();
      using ns = NetnsHandle.open(netnsPath(pod));
      using sock = inNetns(ns, home, () => PacketSocket.open(eth0?.ifindex ?? 0));
      sock.send(gratuitousArp(FORGED_MAC, podV4));
    }
    const r = await running.done;
    assert.equal(r.code, 1, r.stdout + r.stderr);
    const report = JSON.parse(r.stdout) as AuditReport;
    assert.equal(report.violations[0]?.verdict, 'WRONG-MAC', r.stdout);
    assert.equal(report.violations[0]?.expected?.owner, `pod ${CONTAINER_ID}`);
  });

  test('an audit that cannot run: exit 2, not the 1 of a violation', async () => {
    const noInterface = await run('ip', [
      'netns',
      'exec',
      node.nodeNs,
      CLI,
      'arp',
      'audit',
      '--interface',
      'nope0',
      '--config',
      node.configPath,
    ]);
    assert.equal(noInterface.code, 2, noInterface.stderr);
    assert.match(noInterface.stderr, /--interface: no interface nope0 in this namespace/);
    const noAgent = await run('ip', [
      'netns',
      'exec',
      node.nodeNs,
      CLI,
      'arp',
      'audit',
      '--interface',
      'lo',
      '--socket',
      `${node.dir}/nothing.sock`,
    ]);
    assert.equal(noAgent.code, 2, noAgent.stderr);
    assert.match(noAgent.stderr, /the podwire agent is not running/);
    const badSeconds = await run(CLI, ['arp', 'audit', '--interface', 'lo', '--seconds', 'x']);
    assert.equal(badSeconds.code, 2, badSeconds.stderr);
    assert.match(badSeconds.stderr, /--seconds: "x" must be a number/);
  });
});

describe('ipam and metrics agree', () => {
  test('`ipam --json`: sizes and counts are decimal strings, the IPv6 /64 exact', async () => {
    const r = await cli('ipam', '--json');
    assert.equal(r.code, 0, r.stderr);
    const rows = JSON.parse(r.stdout) as IpamRow[];
    assert.deepEqual(
      rows.map((u) => [u.range, u.used, u.size]),
      [
        [V4, '1', '253'],
        [V6, '1', '18446744073709551614'],
      ],
    );
    assert.match((await cli('ipam')).stdout, /fd00:10:244:31::\/64 +1 +18446744073709551614 +0\.0%/);
  });

  test('metrics print the same exact size, not a float rounded to 18446744073709552000', async () => {
    const text = await scrapeMetrics(node.nodeNs, METRICS_PORT);
    assert.match(text, /^podwire_ipam_addresses_size\{range="fd00:10:244:31::\/64"\} 18446744073709551614$/m);
    assert.match(text, /^podwire_ipam_addresses_size\{range="10\.244\.31\.0\/24"\} 253$/m);
  });
});

describe('wrong addresses say what is right', () => {
  test('an unknown path on the metrics port names /metrics, and where the probes are', async () => {
    const r = await httpGet(METRICS_PORT, '/livez');
    assert.equal(r.status, 404);
    assert.equal(
      r.body,
      'not found: GET "/livez": this is the metrics port (metricsAddress), which serves GET /metrics only; the probes /livez and /readyz are on healthAddress\n',
    );
  });

  test('an unknown path on the health port names /livez and /readyz, and where the metrics are', async () => {
    const r = await httpGet(HEALTH_PORT, '/metrics');
    assert.equal(r.status, 404);
    assert.equal(
      r.body,
      'not found: GET "/metrics": this is the health port (healthAddress), which serves GET /livez and GET /readyz; metrics (GET /metrics) are on metricsAddress\n',
    );
  });

  test("`--socket` at the CNI socket: told it is the relay's, and where the control socket is, at once", async () => {
    const started = Date.now();
    const r = await run(CLI, ['status', '--socket', node.socket]);
    assert.equal(r.code, 1);
    assert.equal(
      r.stderr,
      `podwire status: ${node.socket} is the CNI socket, the one the relay (podwire-cni) talks to, not the agent's control socket; the control socket is beside it: pass --socket ${node.dir}/control.sock, or --config FILE\n`,
    );
    // Not after the CNI server's 5 s request deadline: it refuses the JSON line as soon as it reads it.
    assert.ok(Date.now() - started < 4000, `${Date.now() - started} ms`);
    // The agent still serves the relay afterwards.
    assert.equal((await node.cni({ command: 'STATUS' })).code, 0);
  });
});
