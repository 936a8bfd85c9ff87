/**
 * Alternative link names (RTM_NEWLINKPROP, IFLA_PROP_LIST) and moving a link into another namespace
 * renamed in one request, against the real kernel in throwaway namespaces, checked with `ip`. The OVS
 * datapath's pre-attached ports depend on both: a pooled veth keeps the name Open vSwitch knows it by
 * and takes the pod's attachment name as an alternative one, under which DEL, CHECK and GC find it.
 */
import assert from 'node:assert/strict';
import { closeSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { KernelError } from '../../../src/kernel/libc.js';
import { Rtnetlink } from '../../../src/kernel/netlink/rtnetlink.js';
import { TestNetns } from './netns.js';

const notRoot = process.getuid?.() !== 0;

describe('rtnetlink: alternative names, and a move renamed', { skip: notRoot && 'needs root' }, () => {
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

  test('an alternative name finds, lists and deletes the link; a taken one is EEXIST', () => {
    assert.ok(host && nl);
    const a = nl.addVeth({ name: 'ovptest0', peerName: 'ovqtest0', mtu: 1500 });
    nl.addAltname(a.index, 'pw0123456789abc');
    const found = nl.linkByName('pw0123456789abc');
    assert.equal(found?.index, a.index);
    assert.equal(found?.name, 'ovptest0');
    assert.deepEqual(found?.altnames, ['pw0123456789abc']);
    assert.deepEqual(
      nl.links().find((l) => l.index === a.index)?.altnames,
      ['pw0123456789abc'],
      'a dump carries it too',
    );
    assert.match(host.ip('link', 'show', 'dev', 'ovptest0'), /altname pw0123456789abc/);
    const peer = nl.linkByName('ovqtest0');
    assert.ok(peer);
    assert.equal(peer.altnames, undefined, 'none on a link without');
    assert.throws(
      () => nl?.addAltname(peer.index, 'pw0123456789abc'),
      (e: unknown) => e instanceof KernelError && e.errno === 17,
    );
    assert.equal(nl.deleteLinkByName('pw0123456789abc'), true);
    assert.equal(nl.linkByName('ovptest0'), undefined);
    assert.equal(nl.linkByName('ovqtest0'), undefined, 'the peer went with it');
  });

  test('a link moved into another namespace arrives renamed, with its new MAC, in one request', () => {
    assert.ok(host && pod && nl);
    const a = nl.addVeth({ name: 'ovptest1', peerName: 'ovqtest1', mtu: 1400 });
    const peer = nl.linkByName('ovqtest1');
    assert.ok(peer);
    const fd = pod.openFd();
    try {
      nl.moveLink(peer.index, { netnsFd: fd, ifname: 'eth0', mac: '0a:58:0a:f4:00:07' });
    } finally {
      closeSync(fd);
    }
    assert.equal(nl.linkByName('ovqtest1'), undefined, 'gone from the first namespace');
    const moved = pod.ipJson<Array<{ ifname: string; address: string; mtu: number }>>('link', 'show', 'eth0');
    assert.equal(moved[0]?.address, '0a:58:0a:f4:00:07');
    assert.equal(moved[0]?.mtu, 1400);
    assert.deepEqual(
      pod
        .ipJson<Array<{ ifname: string }>>('link', 'show')
        .map((l) => l.ifname)
        .sort(),
      ['eth0', 'lo'],
      'not under its old name',
    );
    assert.equal(nl.deleteLink(a.index), true);
  });
});
