/**
 * podwire's `bandwidth` capability through the agent (decision 42, src/datapath/pod-bandwidth.ts), on
 * the Linux bridge: ADD puts a TBF on the host veth (traffic to the pod) and creates the pod's own IFB
 * (transmit checksumming off, a TBF: traffic from the pod), to which the checksum hop redirects the
 * host veth; the parameters are the reference plugin's; CHECK reads them back and names drift; DEL
 * removes the IFB; reconcile removes an IFB whose veth is gone; bad rates fail ADD with error 7 naming
 * the field, and leave no veth, IFB or claim behind. Read back with `tc`, not podwire's own codec.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ipJson, must } from '../../bed/exec.js';
import { netnsPath } from '../../bed/namespaces.js';
import { TestNode } from '../../bed/node.js';
import { CHECKSUM_IFB } from '../../src/datapath/checksum-ifb.js';
import { EthtoolSocket } from '../../src/kernel/ethtool.js';
import { inNetns, NetnsHandle } from '../../src/kernel/netns.js';

const node = new TestNode({ podCIDRs: ['10.244.8.0/24'] });
before(() => node.setup());
after(() => node.cleanup());

/** bits/s and bits, as the kubelet passes them. */
const LIMITS = {
  ingressRate: 32_000_000,
  ingressBurst: 1_000_000,
  egressRate: 16_000_000,
  egressBurst: 4_294_967_295,
};

interface Qdisc {
  kind: string;
  handle: string;
  dev: string;
  options?: { rate?: number; burst?: number; limit?: number };
}

async function qdiscsOf(dev: string): Promise<Qdisc[]> {
  // -raw: tc prints the queue's `limit` (else a latency computed from it).
  return JSON.parse(
    await must('tc', ['-n', node.nodeNs, '-j', '-raw', 'qdisc', 'show', 'dev', dev]),
  ) as Qdisc[];
}

async function redirectTarget(veth: string): Promise<string[]> {
  const shown = JSON.parse(
    await must('tc', ['-n', node.nodeNs, '-j', 'filter', 'show', 'dev', veth, 'ingress']),
  ) as Array<{ options?: { actions?: Array<{ to_dev?: string }> } }>;
  return shown.flatMap((f) => f.options?.actions?.map((a) => a.to_dev ?? '') ?? []);
}

async function ifbs(): Promise<string[]> {
  return (await ipJson<Array<{ ifname: string }>>(node.nodeNs, ['link', 'show', 'type', 'ifb'])).map(
    (l) => l.ifname,
  );
}

function txChecksumming(ns: string, ifname: string): boolean {
  using home = NetnsHandle.current();
  using target = NetnsHandle.open(netnsPath(ns));
  using eth = inNetns(target, home, () => EthtoolSocket.open());
  return eth.txChecksumming(ifname);
}

/** Equivalent to: `ip netns exec NS ethtool -K IFNAME tx on|off`. */
function setTxChecksumming(ns: string, ifname: string, on: boolean): void {
  using home = NetnsHandle.current();
  using target = NetnsHandle.open(netnsPath(ns));
  using eth = inNetns(target, home, () => EthtoolSocket.open());
  eth.setTxChecksumming(ifname, on);
}

/** Whether `cond` holds within 5 s (polled). */
async function eventually(cond: () => Promise<boolean>): Promise<boolean> {
  const deadline = Date.now() + 5000;
  for (;;) {
    if (await cond()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
}

const withLimits = (bandwidth: unknown) => ({ runtimeConfig: { bandwidth } });

test('ADD shapes both ways as the reference plugin would; CHECK reads it back; DEL removes the IFB', async () => {
  const pod = await node.addPod('bw');
  const add = await node.cni({ command: 'ADD', containerId: 'ctr-bw', netns: pod, conf: withLimits(LIMITS) });
  assert.equal(add.code, 0, add.stdout);
  const veth = (add.json?.interfaces as Array<{ name: string }> | undefined)?.[0]?.name ?? '';
  const ifb = `pb${veth.slice(2)}`;

  // Traffic to the pod: a TBF at the host veth's root, the rate in bytes/s, 25 ms of queue + the burst.
  const root = (await qdiscsOf(veth)).find((q) => q.kind === 'tbf');
  assert.equal(root?.handle, '1:');
  assert.equal(root?.options?.rate, LIMITS.ingressRate / 8);
  assert.equal(root?.options?.limit, (LIMITS.ingressRate / 8) * 0.025 + LIMITS.ingressBurst / 8);
  // Traffic from the pod: its IFB, the hop's target for this pod, with transmit checksumming off.
  assert.deepEqual(await redirectTarget(veth), [ifb]);
  assert.ok((await ifbs()).includes(CHECKSUM_IFB), 'the node IFB stays for the other pods');
  assert.equal(txChecksumming(node.nodeNs, ifb), false, "the pod IFB's transmit checksumming");
  assert.equal(txChecksumming(pod, 'eth0'), true, "the pod's own: the hop completes what it leaves pending");
  const egress = (await qdiscsOf(ifb)).find((q) => q.kind === 'tbf');
  assert.equal(egress?.options?.rate, LIMITS.egressRate / 8);
  // The kubelet's 4 Gbit burst at 16 Mbit/s is 268 s of traffic: the bucket holds it (under 2^32 ticks).
  assert.ok((egress?.options?.burst ?? 0) > 500_000_000, JSON.stringify(egress));

  const check = (bandwidth: unknown = LIMITS) =>
    node.cni({
      command: 'CHECK',
      containerId: 'ctr-bw',
      netns: pod,
      conf: { prevResult: add.json, ...withLimits(bandwidth) },
    });
  assert.equal((await check()).code, 0, (await check()).stdout);
  // Asked for other rates than those in place, or for none: drift.
  const other = await check({ ...LIMITS, egressRate: 8_000_000 });
  assert.match(other.stdout, new RegExp(`${ifb} shapes at rate 16000000 bit/s.*asks for rate 8000000`));
  const none = await check({});
  assert.match(none.stdout, new RegExp(`${veth} has a TBF, and no ingress rate is asked for`));
  // The pod IFB's transmit checksumming turned on behind podwire's back: drift too.
  setTxChecksumming(node.nodeNs, ifb, true);
  assert.match((await check()).stdout, new RegExp(`${ifb} has transmit checksumming on`));
  setTxChecksumming(node.nodeNs, ifb, false);
  await must('tc', ['-n', node.nodeNs, 'qdisc', 'del', 'dev', veth, 'ingress']);
  assert.match((await check()).stdout, new RegExp(`${veth} does not redirect its ingress to ${ifb}`));

  // The restart (reconcile) puts the redirect back, to the pod's IFB.
  await node.stopAgent();
  await node.startAgent();
  assert.deepEqual(await redirectTarget(veth), [ifb]);
  assert.equal((await check()).code, 0);

  const del = await node.cni({ command: 'DEL', containerId: 'ctr-bw', netns: pod });
  assert.equal(del.code, 0, del.stdout);
  // DEL answers before the veth and the IFB are deleted (decision 14): wait for them.
  assert.ok(await eventually(async () => !(await ifbs()).includes(ifb)), 'DEL removed the pod IFB');
});

test('reconcile removes a pod IFB whose host veth is gone', async () => {
  const pod = await node.addPod('bw2');
  const add = await node.cni({
    command: 'ADD',
    containerId: 'ctr-bw2',
    netns: pod,
    conf: withLimits(LIMITS),
  });
  assert.equal(add.code, 0, add.stdout);
  const veth = (add.json?.interfaces as Array<{ name: string }> | undefined)?.[0]?.name ?? '';
  const ifb = `pb${veth.slice(2)}`;
  await node.stopAgent();
  // Gone while the agent was down (the pod's namespace removed, a DEL interrupted between the two).
  await must('ip', ['-n', node.nodeNs, 'link', 'del', veth]);
  assert.ok((await ifbs()).includes(ifb));
  await node.startAgent();
  assert.ok(!(await ifbs()).includes(ifb), 'reconcile removed the orphan IFB');
  assert.ok((await ifbs()).includes(CHECKSUM_IFB), "and not the node's");
});

test('bad rates: error 7 naming the field, and nothing half-done', async () => {
  const before = { links: await ipJson<unknown[]>(node.nodeNs, ['link', 'show']), claims: node.claims() };
  const cases: Array<[unknown, RegExp]> = [
    [{ ingressRate: -1, ingressBurst: 1000 }, /ingressRate: -1 is negative/],
    [
      { egressRate: 1_000_000, egressBurst: 0 },
      /egressBurst: 0 with egressRate 1000000: a rate needs a burst/,
    ],
    [{ egressRate: 0, egressBurst: 100_000 }, /egressRate: 0 with egressBurst 100000: a burst needs a rate/],
    [{ ingressRate: 1e16, ingressBurst: 1e6 }, /ingressRate: 10000000000000000 bit\/s is above 1 Pbit\/s/],
    [{ ingressRate: 1_000_000, ingressBurst: 2 ** 36 }, /ingressBurst: 68719476736 bits is 4 GiB or more/],
    [{ ingressRate: 1.5, ingressBurst: 1e6 }, /ingressRate: 1\.5 is not an integer/],
    [{ egressRate: '1M', egressBurst: 1e6 }, /egressRate: "1M" is not an integer/],
    // A burst smaller than one frame: the TBF would drop every full-size frame.
    [
      { egressRate: 1_000_000, egressBurst: 8_000 },
      /egressBurst: 8000 bits \(1000 bytes\) holds no full frame/,
    ],
    ['fast', /runtimeConfig\.bandwidth: must be an object/],
  ];
  const pod = await node.addPod('bad');
  for (const [bandwidth, why] of cases) {
    const add = await node.cni({
      command: 'ADD',
      containerId: 'ctr-bad',
      netns: pod,
      conf: withLimits(bandwidth),
    });
    assert.equal(add.code, 1, add.stdout);
    const err = add.json as { code: number; msg: string };
    assert.equal(err.code, 7, add.stdout);
    assert.match(err.msg, why);
  }
  const links = await ipJson<unknown[]>(node.nodeNs, ['link', 'show']);
  assert.equal(links.length, before.links.length, 'no veth or IFB left');
  assert.deepEqual(node.claims(), before.claims, 'no claim left');
});
