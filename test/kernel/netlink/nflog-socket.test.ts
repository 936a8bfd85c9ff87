/**
 * The nfnetlink_log socket (nflog-socket.ts) against the real kernel, in a throwaway namespace: an
 * nftables rule logs UDP to a group, the socket bound to that group reads the packets, and a second
 * bind of the same group is refused; closing the socket releases the group.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { NflogSocket } from '../../../src/kernel/netlink/nflog-socket.js';
import { NFPROTO_IPV4, NFPROTO_IPV6 } from '../../../src/kernel/netlink/uapi/nfnetlink.js';
import { TestNetns } from './netns.js';

const GROUP = 4711;
const bind = { group: GROUP, copyRange: 64, queueThreshold: 1, flushTimeout: 10 };

describe('nfnetlink_log socket', () => {
  let ns: TestNetns;

  before(() => {
    ns = TestNetns.create();
    ns.ip('link', 'set', 'lo', 'up');
    execFileSync('ip', ['netns', 'exec', ns.name, 'nft', '-f', '-'], {
      input: `table inet t {
  chain out {
    type filter hook output priority filter; policy accept;
    udp dport 9999 log prefix "test-prefix" group ${GROUP}
  }
}
`,
    });
  });

  after(() => ns.delete());

  /** `count` UDP datagrams of 1000 bytes to port 9999 of `ip`, sent inside the namespace. */
  const send = (ip: string, count: number) =>
    execFileSync('ip', [
      'netns',
      'exec',
      ns.name,
      'python3',
      '-c',
      `import socket,sys
s=socket.socket(socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET, socket.SOCK_DGRAM)
for i in range(int(sys.argv[2])): s.sendto(b'x'*1000, (sys.argv[1], 9999))`,
      ip,
      String(count),
    ]);

  test('reads each logged packet: family, group, prefix, headers cut at the copy range', () => {
    const sock = ns.enter(() => NflogSocket.open(bind));
    try {
      assert.deepEqual(sock.drain(10).packets, [], 'nothing before a packet is sent');
      send('127.0.0.1', 3);
      send('::1', 2);
      const got = sock.drain(100);
      assert.equal(got.overruns, 0);
      assert.equal(got.packets.length, 5);
      const v4 = got.packets.filter((p) => p.family === NFPROTO_IPV4);
      const v6 = got.packets.filter((p) => p.family === NFPROTO_IPV6);
      assert.equal(v4.length, 3);
      assert.equal(v6.length, 2);
      for (const p of got.packets) {
        assert.equal(p.group, GROUP);
        assert.equal(p.prefix, 'test-prefix');
        assert.equal(p.payload.length, 64, 'the copy range, not the 1000-byte datagram');
      }
      assert.equal((v4[0] as { hwProtocol: number }).hwProtocol, 0x0800);
      assert.equal((v6[0] as { hwProtocol: number }).hwProtocol, 0x86dd);
      assert.deepEqual(sock.drain(10).packets, [], 'each packet read once');
    } finally {
      sock.close();
    }
  });

  test('a group bound by one socket is refused to another, and free again once it is closed', () => {
    const first = ns.enter(() => NflogSocket.open(bind));
    try {
      assert.throws(() => ns.enter(() => NflogSocket.open(bind)), /NFULNL_MSG_CONFIG group 4711: EPERM/);
    } finally {
      first.close();
    }
    const again = ns.enter(() => NflogSocket.open(bind));
    again.close();
    again.close();
    assert.ok(again.closed);
    assert.throws(() => again.drain(1), /closed/);
  });
});
