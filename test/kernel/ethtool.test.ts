/**
 * SIOCETHTOOL transmit checksumming on a veth inside a throwaway namespace (I7): the socket is made
 * there with inNetns, so the interface name resolves in that namespace and nowhere else.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { must } from '../../bed/exec.js';
import { NamespaceSet, netnsPath } from '../../bed/namespaces.js';
import { EthtoolSocket } from '../../src/kernel/ethtool.js';
import { KernelError } from '../../src/kernel/libc.js';
import { inNetns, NetnsHandle } from '../../src/kernel/netns.js';

const spaces = new NamespaceSet();
let ns = '';
let home: NetnsHandle;
let target: NetnsHandle;

before(async () => {
  ns = await spaces.add('ethtool');
  await must('ip', ['-n', ns, 'link', 'add', 'pwtv0', 'type', 'veth', 'peer', 'name', 'pwtv1']);
  home = NetnsHandle.current();
  target = NetnsHandle.open(netnsPath(ns));
});
after(async () => {
  target?.close();
  home?.close();
  await spaces.cleanup();
});

test('tx-checksumming of a veth: on by default, off and on again', () => {
  using eth = inNetns(target, home, () => EthtoolSocket.open());
  assert.equal(eth.txChecksumming('pwtv0'), true);
  eth.setTxChecksumming('pwtv0', false);
  assert.equal(eth.txChecksumming('pwtv0'), false);
  assert.equal(eth.txChecksumming('pwtv1'), true, 'the peer keeps its own setting');
  eth.setTxChecksumming('pwtv0', true);
  assert.equal(eth.txChecksumming('pwtv0'), true);
});

test('an interface of another namespace is not found (ENODEV), and a closed socket refuses', () => {
  const eth = inNetns(target, home, () => EthtoolSocket.open());
  assert.throws(
    () => eth.txChecksumming('lo-not-here'),
    (e: unknown) => e instanceof KernelError && e.errnoName === 'ENODEV',
  );
  eth.close();
  eth.close();
  assert.throws(() => eth.txChecksumming('pwtv0'), /after close/);
});
