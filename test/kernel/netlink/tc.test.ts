/**
 * The ingress redirect (tc-message.ts) against the real kernel, in a throwaway namespace: what
 * `addIngressQdisc` and `addIngressRedirect` write is what `tc -j filter show dev X ingress` reads,
 * and `ingressFilters` reads it back the same way.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { must } from '../../../bed/exec.js';
import { NamespaceSet, netnsPath } from '../../../bed/namespaces.js';
import { Rtnetlink } from '../../../src/kernel/netlink/rtnetlink.js';
import { isRedirectAllTo } from '../../../src/kernel/netlink/tc-message.js';
import { ETH_P_ALL } from '../../../src/kernel/netlink/uapi/tc.js';
import { inNetns, NetnsHandle } from '../../../src/kernel/netns.js';

const spaces = new NamespaceSet();
let ns = '';
let home: NetnsHandle;
let nl: Rtnetlink;

before(async () => {
  ns = await spaces.add('tc');
  await must('ip', ['-n', ns, 'link', 'add', 'pwtv0', 'type', 'veth', 'peer', 'name', 'pwtv1']);
  home = NetnsHandle.current();
  using target = NetnsHandle.open(netnsPath(ns));
  nl = inNetns(target, home, () => Rtnetlink.open());
});
after(async () => {
  nl?.close();
  home?.close();
  await spaces.cleanup();
});

test('an IFB, the ingress qdisc and a redirect of every frame to it, read back by tc and by netlink', async () => {
  const ifb = nl.addIfb({ name: 'pwtifb0', mtu: 1500 });
  assert.equal(ifb.kind, 'ifb');
  const veth = nl.linkByName('pwtv0');
  assert.ok(veth);
  assert.deepEqual(nl.ingressFilters(veth.index), [], 'no qdisc yet: no filter');
  assert.equal(nl.addIngressQdisc(veth.index), true);
  assert.equal(nl.addIngressQdisc(veth.index), false, 'there already');
  const qdiscs = JSON.parse(await must('tc', ['-n', ns, '-j', 'qdisc', 'show', 'dev', 'pwtv0', 'ingress']));
  assert.equal(qdiscs[0]?.kind, 'ingress');
  assert.deepEqual(nl.ingressFilters(veth.index), []);

  nl.addIngressRedirect(veth.index, ifb.index);
  const shown = JSON.parse(await must('tc', ['-n', ns, '-j', 'filter', 'show', 'dev', 'pwtv0', 'ingress']));
  const rule = shown.find((f: { options?: { match?: unknown } }) => f.options?.match !== undefined);
  assert.ok(rule, JSON.stringify(shown));
  assert.equal(rule.protocol, 'all');
  assert.equal(rule.pref, 1);
  assert.equal(rule.kind, 'u32');
  assert.deepEqual(rule.options.match, { value: '0', mask: '0', offmask: '', off: 0 });
  const act = rule.options.actions[0];
  assert.equal(act.kind, 'mirred');
  assert.equal(act.mirred_action, 'redirect');
  assert.equal(act.direction, 'egress');
  assert.equal(act.to_dev, 'pwtifb0');
  assert.equal(act.control_action.type, 'stolen');

  const read = nl.ingressFilters(veth.index);
  const ours = read.filter((f) => isRedirectAllTo(f, ifb.index));
  assert.equal(ours.length, 1, JSON.stringify(read));
  assert.equal(ours[0]?.protocol, ETH_P_ALL);
  assert.equal(ours[0]?.prio, 1);
  assert.equal(read.filter((f) => isRedirectAllTo(f, veth.index)).length, 0, 'another target is not it');
  assert.deepEqual(nl.ingressFilters(nl.linkByName('pwtv1')?.index ?? 0), [], 'the peer has none');
});

test('a root TBF, read back by tc and by netlink; a 64-bit rate goes in TCA_TBF_RATE64', async () => {
  const veth = nl.linkByName('pwtv1');
  assert.ok(veth);
  nl.replaceRootTbf(veth.index, { rate: 4_000_000, buffer: 1_953_125, limit: 225_000 });
  const shown = JSON.parse(await must('tc', ['-n', ns, '-j', '-raw', 'qdisc', 'show', 'dev', 'pwtv1']));
  assert.equal(shown[0]?.kind, 'tbf');
  assert.equal(shown[0]?.handle, '1:');
  assert.equal(shown[0]?.options?.rate, 4_000_000);
  assert.equal(shown[0]?.options?.limit, 225_000);
  // 1953125 ticks of 64 ns are 125 ms: 500000 bytes at 4 MB/s.
  assert.equal(shown[0]?.options?.burst, 500_000);
  assert.deepEqual(
    nl.qdiscs(veth.index).map((q) => q.tbf),
    [{ rate: 4_000_000, buffer: 1_953_125, limit: 225_000 }],
  );
  // Replaced, not added beside: 10 GB/s does not fit tc_ratespec's u32.
  nl.replaceRootTbf(veth.index, { rate: 10_000_000_000, buffer: 6400, limit: 300_000_000 });
  assert.deepEqual(
    nl.qdiscs(veth.index).map((q) => q.tbf),
    [{ rate: 10_000_000_000, buffer: 6400, limit: 300_000_000 }],
  );
  const again = JSON.parse(await must('tc', ['-n', ns, '-j', 'qdisc', 'show', 'dev', 'pwtv1']));
  assert.equal(again[0]?.options?.rate, 10_000_000_000);
});
