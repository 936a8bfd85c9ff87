/** The ARP audit's verdicts on hand-made frames. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ARPOP_REQUEST, encodeArpFrame, gratuitousArp } from '../../src/arp/arp-frame.js';
import { auditArp, type Identity } from '../../src/arp/audit.js';

const GW: Identity = { ip: '10.244.1.1', mac: '02:00:00:00:00:01', owner: 'gateway' };
const NODE: Identity = { ip: '172.30.0.10', mac: '02:00:00:00:00:10', owner: 'node uplink' };
const POD: Identity = { ip: '10.244.1.2', mac: '0a:58:0a:f4:01:02', owner: 'pod' };

function request(src: string, sha: string, spa: string, tpa: string): Buffer {
  return encodeArpFrame({
    dst: 'ff:ff:ff:ff:ff:ff',
    src,
    arp: { op: ARPOP_REQUEST, sha, spa, tha: '00:00:00:00:00:00', tpa },
  });
}

test('consistent frames are ok; unknown senders are reported, not judged', () => {
  const r = auditArp(
    [
      gratuitousArp(POD.mac, POD.ip),
      gratuitousArp(POD.mac, POD.ip),
      request(GW.mac, GW.mac, GW.ip, POD.ip),
      gratuitousArp('02:aa:aa:aa:aa:aa', '192.0.2.9'),
    ],
    [GW, NODE, POD],
  );
  assert.equal(r.frames, 4);
  assert.deepEqual(
    r.rows.map((x) => [x.senderIp, x.frames, x.verdict]),
    [
      ['10.244.1.1', 1, 'ok'],
      ['10.244.1.2', 2, 'ok'],
      ['192.0.2.9', 1, 'unknown'],
    ],
  );
  assert.deepEqual(r.violations, []);
});

test("failure 2: the node's IP with the gateway's MAC is a WRONG-MAC violation naming the owner", () => {
  const r = auditArp([request(GW.mac, GW.mac, NODE.ip, POD.ip)], [GW, NODE, POD]);
  assert.equal(r.violations.length, 1);
  assert.equal(r.violations[0]?.verdict, 'WRONG-MAC');
  assert.equal(r.violations[0]?.expected?.owner, 'node uplink');
});

test('an Ethernet source that is not the ARP sender MAC is a SRC-MISMATCH', () => {
  const r = auditArp([request('02:bb:bb:bb:bb:bb', POD.mac, POD.ip, GW.ip)], [GW, POD]);
  assert.equal(r.violations[0]?.verdict, 'SRC-MISMATCH');
});

test('frames that are not ARP are counted as undecodable', () => {
  const r = auditArp([Buffer.alloc(20)], [GW]);
  assert.equal(r.undecodable, 1);
  assert.deepEqual(r.rows, []);
});
