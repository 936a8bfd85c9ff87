/**
 * Links through rtnetlink against the real kernel, inside throwaway namespaces, checked with `ip`.
 * Needs root (CAP_NET_ADMIN and `ip netns`).
 */
import assert from 'node:assert/strict';
import { closeSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { KernelError } from '../../../src/kernel/libc.js';
import { Rtnetlink } from '../../../src/kernel/netlink/rtnetlink.js';
import { IFF_UP } from '../../../src/kernel/netlink/uapi/if.js';
import { ipLinkView, linkView } from '../codec/ip-json.js';
import { TestNetns } from './netns.js';

const notRoot = process.getuid?.() !== 0;

interface IpLink {
  ifindex: number;
  ifname: string;
  mtu: number;
  address: string;
  flags: string[];
  master?: string;
  linkinfo?: { info_kind?: string };
}

describe('rtnetlink links', { skip: notRoot && 'needs root' }, () => {
  let host: TestNetns | undefined;
  let pod: TestNetns | undefined;
  let nl: Rtnetlink | undefined;

  before(() => {
    host = TestNetns.create();
    pod = TestNetns.create();
    nl = host.enter(() => Rtnetlink.open());
  });

  after(() => {
    try {
      nl?.close();
    } finally {
      try {
        host?.delete();
      } finally {
        pod?.delete();
      }
    }
  });

  const ctx = () => {
    assert.ok(host && pod && nl);
    return { host, pod, nl };
  };

  test('a veth whose peer is created directly inside another namespace', () => {
    const { host, pod, nl } = ctx();
    const fd = pod.openFd();
    let veth: ReturnType<Rtnetlink['addVeth']>;
    try {
      veth = nl.addVeth({
        name: 'pw-veth0',
        peerName: 'eth0',
        mtu: 1400,
        peerNetnsFd: fd,
        peerMac: '02:00:00:00:00:02',
      });
    } finally {
      closeSync(fd);
    }
    assert.equal(veth.name, 'pw-veth0');
    assert.equal(veth.kind, 'veth');
    assert.equal(veth.mtu, 1400);
    const [peer] = pod.ipJson<IpLink[]>('-d', 'link', 'show', 'eth0');
    assert.equal(peer?.mtu, 1400);
    assert.equal(peer?.address, '02:00:00:00:00:02');
    assert.equal(peer?.linkinfo?.info_kind, 'veth');
    const [ours] = host.ipJson<IpLink[]>('link', 'show', 'pw-veth0');
    assert.equal(ours?.ifindex, veth.index);
    assert.equal(ours?.address, veth.mac);
    assert.throws(() => host.ip('link', 'show', 'eth0'), 'the peer is not in the first namespace');
    assert.throws(() => pod.ip('link', 'show', 'pw-veth0'), 'the first end is not in the peer namespace');
    assert.equal(veth.linkIndex, peer?.ifindex);
    assert.equal(typeof veth.linkNetnsId, 'number');
  });

  test('a bridge with a MAC; master, up, down, MTU and MAC of a port', () => {
    const { host, nl } = ctx();
    const br = nl.addBridge({ name: 'pw-br0', mtu: 1450, mac: '02:00:00:00:00:03' });
    assert.equal(br.kind, 'bridge');
    assert.equal(br.mac, '02:00:00:00:00:03');
    const veth = nl.addVeth({ name: 'pw-a', peerName: 'pw-b', mtu: 1500 });
    nl.setMaster(veth.index, br.index);
    nl.setLinkUp(veth.index);
    nl.setLinkUp(br.index);
    nl.setMtu(veth.index, 1300);
    nl.setMac(veth.index, '02:00:00:00:00:0a');
    const [shown] = host.ipJson<IpLink[]>('link', 'show', 'pw-a');
    assert.equal(shown?.master, 'pw-br0');
    assert.ok(shown?.flags.includes('UP'));
    assert.equal(shown?.mtu, 1300);
    assert.equal(shown?.address, '02:00:00:00:00:0a');
    const read = nl.linkByIndex(veth.index);
    assert.equal(read?.masterIndex, br.index);
    assert.equal(read?.up, true);
    assert.equal(read?.mtu, 1300);
    assert.equal(read?.mac, '02:00:00:00:00:0a');
    assert.equal(nl.linkByName('pw-br0')?.up, true);

    nl.setLinkDown(veth.index);
    nl.setMaster(veth.index, 0);
    const down = nl.linkByName('pw-a');
    assert.equal(down?.up, false);
    assert.equal((down?.flags ?? IFF_UP) & IFF_UP, 0);
    assert.equal(down?.masterIndex, undefined);
    assert.equal(host.ipJson<IpLink[]>('link', 'show', 'pw-a')[0]?.master, undefined);
  });

  test('the link dump matches ip -j -d link show', () => {
    const { host, nl } = ctx();
    const links = nl.links();
    assert.ok(links.length >= 5);
    assert.deepStrictEqual(
      links.map((l) => linkView(l, links)),
      host.ipJson<Record<string, unknown>[]>('-d', 'link', 'show').map(ipLinkView),
    );
  });

  test('lookups of missing links give undefined, deletes of missing links give false', () => {
    const { nl } = ctx();
    assert.equal(nl.linkByName('pw-missing'), undefined);
    assert.equal(nl.linkByIndex(999_999), undefined);
    assert.equal(nl.deleteLinkByName('pw-missing'), false);
    assert.equal(nl.deleteLink(999_999), false);
  });

  test('a duplicate veth fails with EEXIST from RTM_NEWLINK', () => {
    const { nl } = ctx();
    nl.addVeth({ name: 'pw-dup', peerName: 'pw-dup-p', mtu: 1500 });
    assert.throws(
      () => nl.addVeth({ name: 'pw-dup', peerName: 'pw-dup-q', mtu: 1500 }),
      (err: unknown) => {
        assert.ok(err instanceof KernelError);
        assert.equal(err.errno, 17);
        assert.equal(err.errnoName, 'EEXIST');
        assert.equal(err.syscall, 'RTM_NEWLINK');
        // This kernel sends no text for EEXIST; when one does, it must reach the message.
        if (err.extack !== undefined) assert.ok(err.message.includes(err.extack));
        return true;
      },
    );
    assert.equal(nl.linkByName('pw-dup-q'), undefined, 'the failed request created nothing');
  });

  test('the extended-ack text reaches the KernelError', () => {
    const { nl } = ctx();
    const veth = nl.addVeth({ name: 'pw-mtu', peerName: 'pw-mtu-p', mtu: 1500 });
    assert.throws(
      () => nl.setMtu(veth.index, 1_000_000),
      (err: unknown) => {
        assert.ok(err instanceof KernelError);
        assert.equal(err.errnoName, 'EINVAL');
        assert.equal(err.syscall, 'RTM_SETLINK');
        assert.ok(err.extack && err.extack.length > 0, 'the kernel explains an MTU above the maximum');
        assert.ok(err.message.includes(err.extack));
        return true;
      },
    );
  });

  test('deleting a veth end removes its peer, also in another namespace', () => {
    const { pod, nl } = ctx();
    const fd = pod.openFd();
    try {
      nl.addVeth({ name: 'pw-del', peerName: 'eth1', mtu: 1500, peerNetnsFd: fd });
    } finally {
      closeSync(fd);
    }
    assert.equal(pod.ipJson<IpLink[]>('link', 'show', 'eth1').length, 1);
    assert.equal(nl.deleteLinkByName('pw-del'), true);
    assert.equal(nl.linkByName('pw-del'), undefined);
    assert.throws(() => pod.ip('link', 'show', 'eth1'));
    const other = nl.addVeth({ name: 'pw-del2', peerName: 'pw-del2-p', mtu: 1500 });
    assert.equal(nl.deleteLink(other.index), true);
    assert.equal(nl.deleteLink(other.index), false);
  });
});
