/**
 * The `bandwidth` capability's limits (src/cni/bandwidth.ts) and the TBF they become
 * (src/datapath/pod-bandwidth.ts, the reference plugin's arithmetic; decision 42).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseBandwidth } from '../../src/cni/bandwidth.js';
import { planBandwidth, tbfParams } from '../../src/datapath/pod-bandwidth.js';

test('absent, empty or all zero: no limits', () => {
  assert.equal(parseBandwidth(undefined), undefined);
  assert.equal(parseBandwidth({}), undefined);
  assert.equal(parseBandwidth({ bandwidth: {} }), undefined);
  assert.equal(parseBandwidth({ bandwidth: { ingressRate: 0, ingressBurst: 0 } }), undefined);
});

test('each direction on its own', () => {
  assert.deepEqual(parseBandwidth({ bandwidth: { egressRate: 1000, egressBurst: 20000 } }), {
    egress: { rateBits: 1000, burstBits: 20000 },
  });
  assert.deepEqual(parseBandwidth({ bandwidth: { ingressRate: 8, ingressBurst: 2 ** 32 } }), {
    ingress: { rateBits: 8, burstBits: 2 ** 32 },
  });
});

// Depends on `lookup` (cni/bandwidth.ts): containerd 1.6 passes the struct as Go prints it, with
// capitalised keys, and a podwire that read only `ingressRate` shaped nothing (test:k8s found it).
test("the keys in any letter case, as containerd 1.6 sends them (Go's field names)", () => {
  const containerd = { IngressRate: 1000000, IngressBurst: 4294967295, EgressRate: 0, EgressBurst: 0 };
  assert.deepEqual(parseBandwidth({ bandwidth: containerd }), {
    ingress: { rateBits: 1000000, burstBits: 4294967295 },
  });
  // The exact name wins over another case; the same name twice in two cases is refused.
  assert.deepEqual(parseBandwidth({ bandwidth: { ingressRate: 800, INGRESSRATE: 8, ingressBurst: 100 } }), {
    ingress: { rateBits: 800, burstBits: 100 },
  });
  assert.throws(
    () => parseBandwidth({ bandwidth: { IngressRate: 800, INGRESSRATE: 8, ingressBurst: 100 } }),
    /ingressRate: given twice, as "IngressRate" and "INGRESSRATE"/,
  );
});

test('refused, naming the field', () => {
  const cases: Array<[unknown, RegExp]> = [
    [[], /runtimeConfig\.bandwidth: must be an object/],
    [{ ingressRate: -8, ingressBurst: 1 }, /ingressRate: -8 is negative/],
    [{ ingressRate: 8, ingressBurst: -1 }, /ingressBurst: -1 is negative/],
    [{ egressRate: 7, egressBurst: 100 }, /egressRate: 7 bit\/s is less than one byte per second/],
    [{ egressRate: 1e15 + 8, egressBurst: 100 }, /above 1 Pbit\/s/],
    [{ egressRate: 100, egressBurst: 2 ** 35 }, /egressBurst: 34359738368 bits is 4 GiB or more/],
    [{ egressRate: true, egressBurst: 100 }, /egressRate: true is not an integer/],
  ];
  for (const [bandwidth, why] of cases) assert.throws(() => parseBandwidth({ bandwidth }), why);
});

test("the TBF is the reference plugin's: bytes/s, the burst's time in 64 ns ticks, 25 ms of queue + the burst", () => {
  assert.deepEqual(tbfParams({ rateBits: 32_000_000, burstBits: 1_000_000 }, 1500, 'ingressBurst'), {
    rate: 4_000_000,
    // 125000 bytes at 4 MB/s: 31250 µs, 15.625 ticks each.
    buffer: 488_281,
    limit: 100_000 + 125_000,
  });
  // The kubelet's 4 Gbit burst at 1 Mbit/s: 4295 s; the bucket stops at 2^32 - 1 ticks.
  assert.equal(
    tbfParams({ rateBits: 1_000_000, burstBits: 2 ** 32 - 1 }, 1500, 'egressBurst').buffer,
    0xffffffff,
  );
  assert.throws(
    () => tbfParams({ rateBits: 1_000_000, burstBits: 12_000 }, 1500, 'egressBurst'),
    /egressBurst: 12000 bits \(1500 bytes\) holds no full frame of 1514 bytes \(MTU 1500\)/,
  );
  assert.deepEqual(planBandwidth(undefined, 1500), {});
});
