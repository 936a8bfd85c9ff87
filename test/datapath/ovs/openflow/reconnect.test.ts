/**
 * The connection survives its switch: ovs-vswitchd killed (SIGKILL) and started again, the socket
 * closed under it, and a switch that stops answering (SIGSTOP) are each noticed, requests during the
 * outage fail fast with NotAvailableError, and the connection comes back by itself.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { OpenflowSwitch, ovsAvailable } from '../../../../bed/openflow-switch.js';
import { NotAvailableError } from '../../../../src/base/errors.js';
import { OpenflowConnection, type SwitchFeatures } from '../../../../src/datapath/ovs/openflow/connection.js';
import { datapathIdText } from '../../../../src/datapath/ovs/openflow/features.js';
import { OFPT13 } from '../../../../src/datapath/ovs/openflow/header.js';
import { flowMod } from './of-messages.js';

const skip = ovsAvailable() ? false : 'Open vSwitch (ovsdb-server, ovs-vswitchd) is not installed';

/** Resolves when `fn` returns true, polling every 5 ms; rejects after `ms`. */
async function until(fn: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

describe('reconnect against a real switch', { skip }, () => {
  const sw = new OpenflowSwitch();
  let conn: OpenflowConnection;
  const ups: SwitchFeatures[] = [];
  const downs: Error[] = [];

  before(async () => {
    await sw.start();
    conn = OpenflowConnection.open({
      target: sw.target,
      echoIntervalMs: 200,
      echoTimeoutMs: 400,
      backoffMs: { initial: 20, max: 200 },
    });
    conn.onUp((f) => ups.push(f));
    conn.onDown((e) => downs.push(e));
    await conn.waitUp(10_000);
  });
  after(async () => {
    const pid = sw.ovs.vswitchdPid;
    if (pid !== undefined) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {
        // Already gone: nothing to continue.
      }
    }
    await conn?.close();
    await sw.cleanup();
  });

  // Depends on: connection.ts #drop/#scheduleReconnect/#up, onDown/onUp, stats; bed/ovs.ts restartVswitchd.
  test('ovs-vswitchd SIGKILLed and restarted: requests fail fast meanwhile, the connection comes back', async (t) => {
    const first = conn.features as SwitchFeatures;
    await conn.transact([flowMod({ priority: 3, cookie: 0x3n })]);
    assert.equal((await sw.flows()).length, 1);
    const connects = conn.stats.connects;
    const pid = sw.ovs.vswitchdPid as number;
    process.kill(pid, 'SIGKILL');
    await until(() => !conn.connected, 2000, 'the connection to notice the kill');
    assert.equal(downs.length, 1);
    assert.ok(downs[0] instanceof Error);

    // During the outage: NotAvailableError, at once.
    for (let i = 0; i < 20; i++) {
      const t0 = performance.now();
      await assert.rejects(conn.request(OFPT13.BARRIER_REQUEST), NotAvailableError);
      assert.ok(performance.now() - t0 < 100, `rejected in ${performance.now() - t0} ms`);
    }
    await assert.rejects(conn.waitUp(50), NotAvailableError);

    await sw.ovs.restartVswitchd();
    const again = await conn.waitUp(10_000);
    assert.equal(conn.stats.connects, connects + 1);
    assert.equal(conn.stats.disconnects, 1);
    await until(() => ups.length === connects + 1, 1000, 'onUp');
    t.diagnostic(
      `datapath id before ${datapathIdText(first.datapathId)}, after the restart ${datapathIdText(again.datapathId)}`,
    );
    // OVS derives the id from the bridge's MAC (or other_config:datapath-id); the database kept both.
    assert.equal(again.datapathId, first.datapathId);
    assert.equal(datapathIdText(again.datapathId), await sw.datapathId());
    // The new switch has no flows: what the lead's replay must notice.
    assert.deepEqual(await sw.flows(), []);
    await conn.request(OFPT13.BARRIER_REQUEST);
  });

  // Depends on: connection.ts reconnect() (the seam) and #drop failing every pending request.
  test('the socket closed under it: pending requests reject at once, then it reconnects', async () => {
    const connects = conn.stats.connects;
    const downsBefore = downs.length;
    const pending = Array.from({ length: 50 }, () => conn.request(OFPT13.ECHO_REQUEST, Buffer.alloc(64)));
    conn.reconnect('test: socket destroyed');
    const results = await Promise.allSettled(pending);
    assert.ok(
      results.every((r) => r.status === 'rejected' && r.reason instanceof NotAvailableError),
      'every pending request rejected with NotAvailableError',
    );
    await conn.waitUp(5000);
    assert.equal(conn.stats.connects, connects + 1);
    await until(() => downs.length === downsBefore + 1, 1000, 'onDown');
    await conn.request(OFPT13.BARRIER_REQUEST);
  });

  // Depends on: connection.ts echo keepalive (#onIdle, echoTimeoutMs) and the handshake timeout.
  test('a switch that stops answering (SIGSTOP) is dropped after the echo timeout; pending requests reject', async (t) => {
    const pid = sw.ovs.vswitchdPid as number;
    const echoTimeouts = conn.stats.echoTimeouts;
    const connects = conn.stats.connects;
    process.kill(pid, 'SIGSTOP');
    const t0 = performance.now();
    try {
      const err = await conn.request(OFPT13.BARRIER_REQUEST).then(
        () => assert.fail('a stopped switch answered'),
        (e: unknown) => e,
      );
      const waited = performance.now() - t0;
      t.diagnostic(`pending request rejected after ${Math.round(waited)} ms: ${String(err)}`);
      assert.ok(err instanceof NotAvailableError, String(err));
      assert.match(err.message, /ECHO_REPLY/);
      // Idle 200 ms, then 400 ms without an ECHO_REPLY.
      assert.ok(waited >= 350 && waited < 2000, `${waited} ms`);
      assert.equal(conn.stats.echoTimeouts, echoTimeouts + 1);
      assert.equal(conn.connected, false);
      // Reconnecting to a stopped switch: the kernel accepts, nobody says HELLO; it keeps trying.
      await sleep(600);
      assert.equal(conn.connected, false);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await conn.waitUp(5000);
    assert.ok(conn.stats.connects > connects);
    await conn.request(OFPT13.BARRIER_REQUEST);
  });
});
