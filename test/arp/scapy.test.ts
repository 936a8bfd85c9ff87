/**
 * Cross-checks the frame codecs against scapy, an independent decoder: scapy dissects our gratuitous
 * ARPs and Neighbor Advertisements and recomputes the ICMPv6 checksum itself.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import fc from 'fast-check';
import { gratuitousArp } from '../../src/arp/arp-frame.js';
import { unsolicitedNeighborAdvertisement } from '../../src/arp/ndp-frame.js';

const PYTHON = '/usr/bin/python3';

/** Reads [{kind, hex}] on stdin, prints scapy's view of each frame as JSON. */
const DISSECT = `
import json, sys
from scapy.layers.l2 import Ether, ARP
from scapy.layers.inet6 import IPv6, ICMPv6ND_NA, ICMPv6NDOptDstLLAddr
out = []
for item in json.load(sys.stdin):
    raw = bytes.fromhex(item["hex"])
    p = Ether(raw)
    r = {"dst": p.dst, "src": p.src, "type": p.type, "len": len(raw)}
    if item["kind"] == "arp":
        a = p[ARP]
        r.update(hwtype=a.hwtype, ptype=a.ptype, hwlen=a.hwlen, plen=a.plen, op=a.op,
                 hwsrc=a.hwsrc, psrc=a.psrc, hwdst=a.hwdst, pdst=a.pdst)
    else:
        ip, na = p[IPv6], p[ICMPv6ND_NA]
        opt = p.getlayer(ICMPv6NDOptDstLLAddr)
        r.update(version=ip.version, tc=ip.tc, fl=ip.fl, plen=ip.plen, nh=ip.nh, hlim=ip.hlim,
                 ipsrc=ip.src, ipdst=ip.dst, icmptype=na.type, code=na.code, R=na.R, S=na.S, O=na.O,
                 tgt=na.tgt, cksum=na.cksum, opttype=opt.type, optlen=opt.len, lladdr=opt.lladdr)
        # Make scapy compute the checksum itself: clear it and rebuild the packet.
        q = Ether(raw)
        q[ICMPv6ND_NA].cksum = None
        r["scapy_cksum"] = Ether(bytes(q))[ICMPv6ND_NA].cksum
    out.append(r)
json.dump(out, sys.stdout)
`;

import { canonicalIp } from '../../src/base/ip.js';

function scapyPresent(): boolean {
  return spawnSync(PYTHON, ['-c', 'import scapy'], { stdio: 'ignore' }).status === 0;
}

function dissect(frames: { kind: 'arp' | 'na'; hex: string }[]): Record<string, unknown>[] {
  const run = spawnSync(PYTHON, ['-c', DISSECT], { input: JSON.stringify(frames), encoding: 'utf8' });
  if (run.error) throw run.error;
  assert.equal(run.status, 0, `scapy failed: ${run.stderr}`);
  return JSON.parse(run.stdout) as Record<string, unknown>[];
}

const mac = fc
  .uint8Array({ minLength: 6, maxLength: 6 })
  .map((b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join(':'));
const ipv6 = fc
  .array(fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 0xffff })), { minLength: 8, maxLength: 8 })
  .filter((w) => (w[0] ?? 0) < 0xff00)
  .map((w) => canonicalIp(w.map((x) => x.toString(16)).join(':')));

test('scapy decodes our gratuitous ARPs and Neighbor Advertisements the same way', (t) => {
  if (!scapyPresent()) {
    t.skip(`scapy is not importable by ${PYTHON} (apt-get install -y python3-scapy)`);
    return;
  }
  const arps = [
    ['02:42:ac:11:00:02', '10.244.1.5'],
    ...fc.sample(fc.tuple(mac, fc.ipV4()), { numRuns: 30, seed: 4861 }),
  ];
  const nas = [
    ['02:42:ac:11:00:03', 'fd00:10:244::5'],
    ...fc.sample(fc.tuple(mac, ipv6), { numRuns: 30, seed: 826 }),
  ];
  const frames = [
    ...arps.map(([m, ip]) => ({
      kind: 'arp' as const,
      hex: gratuitousArp(m ?? '', ip ?? '').toString('hex'),
    })),
    ...nas.map(([m, ip]) => ({
      kind: 'na' as const,
      hex: unsolicitedNeighborAdvertisement(m ?? '', ip ?? '').toString('hex'),
    })),
  ];
  const seen = dissect(frames);
  assert.equal(seen.length, frames.length);

  arps.forEach(([m, ip], i) => {
    assert.deepEqual(seen[i], {
      dst: 'ff:ff:ff:ff:ff:ff',
      src: m,
      type: 0x0806,
      len: 42,
      hwtype: 1,
      ptype: 0x0800,
      hwlen: 6,
      plen: 4,
      op: 1,
      hwsrc: m,
      psrc: ip,
      hwdst: '00:00:00:00:00:00',
      pdst: ip,
    });
  });

  nas.forEach(([m, ip], i) => {
    const frame = Buffer.from(frames[arps.length + i]?.hex ?? '', 'hex');
    const r = seen[arps.length + i] ?? {};
    assert.equal(r.scapy_cksum, r.cksum, `scapy computes another checksum for ${ip}`);
    assert.equal(r.cksum, frame.readUInt16BE(56));
    const { scapy_cksum: _, cksum: __, ...fields } = r;
    assert.deepEqual(fields, {
      dst: '33:33:00:00:00:01',
      src: m,
      type: 0x86dd,
      len: 86,
      version: 6,
      tc: 0,
      fl: 0,
      plen: 32,
      nh: 58,
      hlim: 255,
      ipsrc: ip,
      ipdst: 'ff02::1',
      icmptype: 136,
      code: 0,
      R: 0,
      S: 0,
      O: 1,
      tgt: ip,
      opttype: 2,
      optlen: 1,
      lladdr: m,
    });
  });
});
