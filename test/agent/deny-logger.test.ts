/**
 * The agent's deny log (agent/policy/deny-logger.ts) on a fake `DeniedPacketLog` (the seam; the real
 * one, NFLOG on the Linux bridge, is test/datapath/linux-bridge-policy-deny-log.test.ts) and a fake
 * clock: the lines, the token bucket, the suppressed count, overruns, failures, stop.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { jsonLogger } from '../../src/agent/log.js';
import { DenyLogger, NO_RULE_ALLOWS } from '../../src/agent/policy/deny-logger.js';
import type { DeniedPacket, DeniedPacketLog } from '../../src/datapath/policy-backend.js';
import type { PodPolicy } from '../../src/policy/model.js';

const APPLIED: PodPolicy[] = [
  {
    namespace: 'ns',
    name: 'web',
    ips: ['10.0.0.5', 'fd00::5'],
    ingress: { policies: ['ns/deny-all'], rules: [] },
    egress: null,
  },
];

const toWeb = (i: number): DeniedPacket => ({
  direction: 'ingress',
  src: `10.0.1.${i % 250}`,
  dst: '10.0.0.5',
  protocol: 'TCP',
  port: 80,
});

function bed(opts: { rate?: number; burst?: number } = {}) {
  let clock = 0;
  const queue: DeniedPacket[][] = [];
  let overruns = 0;
  let failNext = false;
  let closes = 0;
  const source: DeniedPacketLog = {
    read: () => {
      if (failNext) {
        failNext = false;
        throw new Error('socket gone');
      }
      const o = overruns;
      overruns = 0;
      return { packets: queue.shift() ?? [], overruns: o };
    },
    close: () => {
      closes++;
    },
  };
  const lines: Array<Record<string, unknown>> = [];
  const log = jsonLogger((l) => lines.push(JSON.parse(l) as Record<string, unknown>));
  const denied = new DenyLogger({ source, applied: () => APPLIED, log, now: () => clock, ...opts });
  return {
    denied,
    lines,
    push: (p: DeniedPacket[]) => queue.push(p),
    tick: (ms: number) => {
      clock += ms;
    },
    overrun: (n: number) => {
      overruns = n;
    },
    failRead: () => {
      failNext = true;
    },
    closes: () => closes,
  };
}

const strip = (l: Record<string, unknown>) => {
  const { time: _t, level: _l, ...rest } = l;
  return rest;
};

describe('deny logger', () => {
  test('one line per packet: the pod by the address of its direction, its isolating policies, the reason', () => {
    const b = bed();
    b.push([toWeb(1), { direction: 'egress', src: 'fd00::5', dst: 'fd00::9', protocol: 'ICMPv6' }]);
    b.denied.poll();
    assert.deepEqual(b.lines.map(strip), [
      {
        msg: 'policy-denied',
        pod: 'ns/web',
        direction: 'ingress',
        src: '10.0.1.1',
        dst: '10.0.0.5',
        protocol: 'TCP',
        port: 80,
        policies: ['ns/deny-all'],
        reason: NO_RULE_ALLOWS,
      },
      {
        // web is not isolated for egress in what is applied (a packet judged before the last apply).
        msg: 'policy-denied',
        pod: 'ns/web',
        direction: 'egress',
        src: 'fd00::5',
        dst: 'fd00::9',
        protocol: 'ICMPv6',
        policies: [],
        reason: 'no rule allows it (the pod is no longer isolated by what is applied)',
      },
    ]);
  });

  test('a flood: the burst, then the rate; the rest counted, carried by the next line and by a summary', () => {
    const b = bed({ rate: 10, burst: 5 });
    b.push(Array.from({ length: 1000 }, (_, i) => toWeb(i)));
    b.denied.poll();
    assert.equal(b.lines.length, 5, 'the burst');
    assert.deepEqual(b.denied.stats, { lines: 5, suppressed: 995, overruns: 0 });
    b.tick(500); // five tokens, the burst
    b.push(Array.from({ length: 100 }, (_, i) => toWeb(i)));
    b.denied.poll();
    assert.equal(b.lines.length, 10);
    assert.equal(b.lines[5]?.suppressed, 995, 'the first line after suppression says how many');
    assert.equal(b.lines[6]?.suppressed, undefined);
    b.denied.poll();
    assert.equal(b.lines.length, 10, 'no token: the 95 suppressed wait');
    b.tick(100);
    b.denied.poll();
    assert.deepEqual(strip(b.lines[10] ?? {}), { msg: 'policy-denied-suppressed', suppressed: 95 });
    assert.deepEqual(b.denied.stats, { lines: 10, suppressed: 1090, overruns: 0 });
    const said = b.lines.reduce((n, l) => n + (typeof l.suppressed === 'number' ? l.suppressed : 0), 0);
    assert.equal(said, 1090, 'every suppressed packet is reported');
  });

  test('an overrun is a warning with the total; a failed read is a warning and the next read goes on', () => {
    const b = bed();
    b.overrun(2);
    b.denied.poll();
    assert.equal(b.lines[0]?.msg, 'policy-denied-overrun');
    assert.equal(b.lines[0]?.overruns, 2);
    b.failRead();
    b.denied.poll();
    assert.equal(b.lines[1]?.msg, 'policy-denied-read-failed');
    b.push([toWeb(3)]);
    b.denied.poll();
    assert.equal(b.lines[2]?.msg, 'policy-denied');
    assert.equal(b.denied.stats.overruns, 2);
  });

  test('stop: reads what is left, reports what is suppressed, closes the source once', () => {
    const b = bed({ rate: 1, burst: 1 });
    b.denied.start();
    b.push([toWeb(1), toWeb(2), toWeb(3)]);
    b.denied.stop();
    b.denied.stop();
    assert.deepEqual(
      b.lines.map((l) => l.msg),
      ['policy-denied', 'policy-denied-suppressed'],
    );
    assert.equal(b.lines[1]?.suppressed, 2);
    assert.equal(b.closes(), 1);
    b.push([toWeb(4)]);
    b.denied.poll();
    assert.equal(b.lines.length, 2, 'nothing read after stop');
  });

  test('a rate or burst that is not positive is refused', () => {
    assert.throws(() => bed({ rate: 0 }), RangeError);
    assert.throws(() => bed({ burst: 0 }), RangeError);
  });
});
