/**
 * The checksum hop of OVS's kernel datapath (src/datapath/ovs/netdev-ingress-hop.ts, decision 32) on
 * this machine's kernel, without OVS (the kernel datapath runs only in the VM): a pod's frames are
 * forwarded from its host veth's netdev ingress hook through the node's IFB and come back to the host
 * veth's receive path, once each; CHECK names a host veth whose chain is gone or changed; DEL's
 * removal and start's sweep of chains whose veth is gone. What the hop stops is the spoofing suite's
 * CAP_NET_ADMIN forgery on `ovs (system)` in `npm run test:vm`.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { must, run } from '../../../bed/exec.js';
import { NamespaceSet, netnsPath } from '../../../bed/namespaces.js';
import { PodwireError } from '../../../src/base/errors.js';
import { CHECKSUM_IFB } from '../../../src/datapath/checksum-ifb.js';
import { HOP_TABLE, NetdevIngressHop, parseHopTable } from '../../../src/datapath/ovs/netdev-ingress-hop.js';
import { EthtoolSocket } from '../../../src/kernel/ethtool.js';
import { Rtnetlink } from '../../../src/kernel/netlink/rtnetlink.js';
import { inNetns, NetnsHandle } from '../../../src/kernel/netns.js';
import { nftIn } from '../../../src/kernel/nft.js';

const spaces = new NamespaceSet();
let nodeNs = '';
let podNs = '';
let home: NetnsHandle;
let node: NetnsHandle;
let nl: Rtnetlink;

before(async () => {
  nodeNs = await spaces.add('hopn');
  podNs = await spaces.add('hopp');
  home = NetnsHandle.current();
  node = NetnsHandle.open(netnsPath(nodeNs));
  nl = inNetns(node, home, () => Rtnetlink.open());
});
after(async () => {
  nl?.close();
  node?.close();
  home?.close();
  await spaces.cleanup();
});

/** The IFB's transmitted packets: every frame the hop forwarded. */
async function ifbTx(): Promise<number> {
  const [link] = JSON.parse(
    await must('ip', ['-n', nodeNs, '-s', '-j', 'link', 'show', CHECKSUM_IFB]),
  ) as Array<{
    stats64: { tx: { packets: number } };
  }>;
  return link?.stats64.tx.packets ?? -1;
}

async function chains(): Promise<ReturnType<typeof parseHopTable>> {
  return parseHopTable(await nftIn(nodeNs).run(['list', 'table', 'netdev', HOP_TABLE]));
}

test("a pod's frames pass the node's IFB once each and reach the node; CHECK, DEL and start's sweep", async () => {
  const hop = new NetdevIngressHop(nl, nftIn(nodeNs));
  await hop.start(1500);
  {
    using eth = inNetns(node, home, () => EthtoolSocket.open());
    assert.equal(eth.txChecksumming(CHECKSUM_IFB), false, "the IFB's transmit checksumming");
  }
  // No IPv6 in the pod: its DAD, MLD and router solicitations would pass the IFB too, uncounted.
  for (const key of ['all', 'default'])
    await must('ip', ['netns', 'exec', podNs, 'sysctl', '-qw', `net.ipv6.conf.${key}.disable_ipv6=1`]);
  // biome-ignore format: one command
  await must('ip', [
    '-n', nodeNs, 'link', 'add', 'pwhop1',
    'type', 'veth', 'peer', 'name', 'eth0', 'netns', podNs,
  ]);
  await must('ip', ['-n', nodeNs, 'addr', 'add', '10.251.0.1/24', 'dev', 'pwhop1']);
  await must('ip', ['-n', podNs, 'addr', 'add', '10.251.0.2/24', 'dev', 'eth0']);
  await must('ip', ['-n', podNs, 'link', 'set', 'eth0', 'up']);
  await hop.redirect('pwhop1');
  await hop.redirect('pwhop1'); // again (a re-attach): still one rule
  await must('ip', ['-n', nodeNs, 'link', 'set', 'pwhop1', 'up']);
  await hop.check('pwhop1');
  assert.deepEqual(
    (await chains()).map((c) => ({ ...c })),
    [{ name: 'pwhop1', hook: 'ingress', dev: 'pwhop1', rules: [`fwd to "${CHECKSUM_IFB}"`] }],
  );

  const before = await ifbTx();
  const pings = 20;
  const ping = await run('ip', [
    'netns',
    'exec',
    podNs,
    'ping',
    '-c',
    String(pings),
    '-i',
    '0.05',
    '-W',
    '1',
    '10.251.0.1',
  ]);
  assert.equal(ping.code, 0, `the node answers the pod through the hop: ${ping.stdout}${ping.stderr}`);
  const passed = (await ifbTx()) - before;
  // Every echo request went through the IFB, once (a frame handed back must not be forwarded again);
  // the pod's ARP (a request, an answer to the node's) may add a few.
  assert.ok(passed >= pings && passed <= pings + 4, `frames through the IFB: ${passed} for ${pings} pings`);

  // CHECK: a chain without the rule, then no chain, each named.
  const nft = nftIn(nodeNs);
  await nft.apply(`flush chain netdev ${HOP_TABLE} pwhop1\n`);
  await assert.rejects(
    hop.check('pwhop1'),
    (err) =>
      err instanceof PodwireError &&
      err.code === 'ERR_CHECK_FAILED' &&
      /pwhop1 has a chain whose rules are not the one forward/.test(err.message) &&
      err.message.includes(CHECKSUM_IFB),
  );
  await hop.remove('pwhop1');
  await hop.remove('pwhop1'); // nothing there: nothing to do
  await assert.rejects(
    hop.check('pwhop1'),
    (err) => err instanceof PodwireError && /pwhop1 has no chain/.test(err.message),
  );
  const unguarded = await ifbTx();
  assert.equal(
    (await run('ip', ['netns', 'exec', podNs, 'ping', '-c', '2', '-W', '1', '10.251.0.1'])).code,
    0,
  );
  assert.equal(await ifbTx(), unguarded, 'without the chain nothing passes the IFB');

  // start() removes the chain of a host veth that is gone (kept by a kernel that keeps chains).
  await hop.redirect('pwhop1');
  await must('ip', ['-n', nodeNs, 'link', 'add', 'pw-hop.2', 'type', 'veth', 'peer', 'name', 'pwhop2p']);
  await hop.redirect('pw-hop.2');
  await must('ip', ['-n', nodeNs, 'link', 'del', 'pw-hop.2']);
  await hop.start(1500);
  assert.deepEqual(
    (await chains()).map((c) => c.name),
    ['pwhop1'],
  );
  await must('ip', ['-n', nodeNs, 'link', 'del', 'pwhop1']);
});

test('a host veth name that nft cannot take as a chain name is refused before anything is applied', async () => {
  const hop = new NetdevIngressHop(nl, nftIn(nodeNs));
  await assert.rejects(hop.redirect('pw x'), /host veth name "pw x" is not one word/);
  await assert.rejects(hop.redirect('pw;flush'), /is not one word/);
  await assert.rejects(hop.redirect('0pw'), /is not one word/);
  await hop.remove('pw x'); // no chain can have that name: nothing to remove
});
