/**
 * The egress masquerade's periodic check (decision 20; src/agent/startup/egress-start.ts): started
 * by `startEgress` as the agent does, with a short period, in a throwaway namespace. An intact table
 * is left alone period after period (no reinstall, so its counters are kept); an outside
 * `nft flush ruleset`, a flushed kept set and a flushed chain are each put back within a few periods,
 * logged and counted; after the stop's undo the table is gone and stays gone.
 *
 * Depends on: `control.startChecks(...)` in startEgress (without it nothing comes back until a
 * reconcile), and `tableMatches`'s comparison of the sets (src/datapath/egress-masquerade.ts; without
 * it a flushed kept set is not seen: the rules are all there).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { must } from '../../bed/exec.js';
import { NamespaceSet } from '../../bed/namespaces.js';
import { type AgentConfig, DEFAULT_CONFIG } from '../../src/agent/config.js';
import { jsonLogger } from '../../src/agent/log.js';
import { type EgressControl, startEgress } from '../../src/agent/startup/egress-start.js';
import { UndoStack } from '../../src/agent/undo-stack.js';
import { EGRESS_NAT_TABLE, readEgressTable } from '../../src/datapath/egress-masquerade.js';
import { nftIn } from '../../src/kernel/nft.js';

const PERIOD_MS = 150;

describe('egress masquerade: periodic check', () => {
  const spaces = new NamespaceSet();
  const undo = new UndoStack();
  const lines: string[] = [];
  const log = jsonLogger((l) => lines.push(l));
  let ns = '';
  let egress: EgressControl | undefined;
  const nftCmd = (...args: string[]) => must('ip', ['netns', 'exec', ns, 'nft', ...args]);
  const repairLogs = () =>
    lines.filter((l) => l.includes('"egress masquerade table was missing or differed'));

  before(async () => {
    ns = await spaces.add('egress');
    const config: AgentConfig = {
      ...DEFAULT_CONFIG,
      podCIDRs: ['10.251.0.0/24', 'fd00:10:251::/64'],
      // A single address too: nft lists it without its /32, which must not read as a difference.
      noMasqueradeCIDRs: ['192.168.7.5/32', '172.16.0.0/12'],
    };
    egress = await startEgress(config, nftIn(ns), log, undo, { checkMs: PERIOD_MS });
  });
  after(async () => {
    await undo.unwind(log); // stops the check, removes the table
    await spaces.cleanup();
  });

  /** Waits until the check has reinstated the table `n` times in all (or fails after 20 periods). */
  async function repairedTimes(n: number): Promise<void> {
    for (const deadline = Date.now() + 20 * PERIOD_MS; egress?.repairs !== n; await sleep(20)) {
      assert.ok(Date.now() < deadline, `repairs ${egress?.repairs}, want ${n}: ${lines.join('')}`);
    }
  }

  test('an intact table is left alone, period after period', async () => {
    await sleep(5 * PERIOD_MS);
    assert.equal(egress?.repairs, 0, lines.join(''));
    assert.deepEqual(repairLogs(), []);
  });

  test('after `nft flush ruleset` the table is back within the period, logged and counted', async () => {
    await nftCmd('flush', 'ruleset');
    // Not read back here: the check may already have put the table back (it did once in CI, between
    // the flush and the read). The repair count says it found the table missing.
    await repairedTimes(1);
    const t = await readEgressTable(nftIn(ns));
    assert.ok(t?.complete);
    assert.deepEqual(t?.keep.sort(), [
      '10.251.0.0/24',
      '172.16.0.0/12',
      '192.168.7.5/32',
      'fd00:10:251::/64',
    ]);
    assert.deepEqual(t?.sources.sort(), ['10.251.0.0/24', 'fd00:10:251::/64']);
    assert.equal(repairLogs().length, 1);
    assert.match(repairLogs()[0] ?? '', /"by":"periodic check"/);
  });

  test('a flushed kept set and a flushed chain are put back too', async () => {
    await nftCmd('flush', 'set', 'inet', EGRESS_NAT_TABLE, 'keep_ipv4');
    await repairedTimes(2);
    assert.deepEqual((await readEgressTable(nftIn(ns)))?.keep.sort(), [
      '10.251.0.0/24',
      '172.16.0.0/12',
      '192.168.7.5/32',
      'fd00:10:251::/64',
    ]);
    await nftCmd('flush', 'chain', 'inet', EGRESS_NAT_TABLE, 'postrouting');
    await repairedTimes(3);
    assert.ok((await readEgressTable(nftIn(ns)))?.complete);
    await sleep(3 * PERIOD_MS);
    assert.equal(egress?.repairs, 3, 'then left alone again');
  });

  test("the stop's undo ends the check before removing the table: it stays gone", async () => {
    await undo.unwind(log);
    await sleep(4 * PERIOD_MS);
    assert.equal(await readEgressTable(nftIn(ns)), undefined);
    assert.equal((await nftCmd('list', 'tables')).trim(), '');
  });
});
