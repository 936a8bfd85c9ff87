/**
 * Issue 15, finding 13: readiness was an exec of `podwire status` (a Node.js start every 10 s) and
 * there was no liveness probe, so a hung agent was never restarted. Depends on
 * src/agent/ops/health-server.ts, started by Agent.start when `healthAddress` is set (by default).
 * Every request goes to the node namespace's own loopback (curl inside `ip netns exec`).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { run } from '../../../bed/exec.js';
import { TestNode } from '../../../bed/node.js';

async function get(ns: string, path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await run('ip', [
    'netns',
    'exec',
    ns,
    'curl',
    '-s',
    '-m',
    '5',
    '-w',
    '\n%{http_code}',
    `http://127.0.0.1:9109${path}`,
  ]);
  const lines = r.stdout.trimEnd().split('\n');
  const status = Number(lines.pop());
  return { status, body: lines.length > 0 ? (JSON.parse(lines.join('\n')) as Record<string, unknown>) : {} };
}

describe('finding 13: /livez and /readyz on loopback, on by default', () => {
  const node = new TestNode({ podCIDRs: ['10.244.81.0/24'] });
  before(() => node.setup());
  after(() => node.cleanup());

  test('a healthy agent is live and ready, each check named', async () => {
    const live = await get(node.nodeNs, '/livez');
    assert.equal(live.status, 200, JSON.stringify(live.body));
    const ready = await get(node.nodeNs, '/readyz');
    assert.equal(ready.status, 200, JSON.stringify(ready.body));
    assert.deepEqual(ready.body.checks, { datapath: 'ok', ipam: 'ok' });
  });

  test('a datapath that is down makes the agent not ready, and ready again once it is back', async () => {
    await run('ip', ['-n', node.nodeNs, 'link', 'set', 'podwire0', 'down']);
    try {
      const ready = await get(node.nodeNs, '/readyz');
      assert.equal(ready.status, 503);
      assert.match(String((ready.body.checks as Record<string, string>).datapath), /podwire0 is down/);
      assert.equal((await get(node.nodeNs, '/livez')).status, 200, 'not ready is not dead');
    } finally {
      await run('ip', ['-n', node.nodeNs, 'link', 'set', 'podwire0', 'up']);
    }
    assert.equal((await get(node.nodeNs, '/readyz')).status, 200);
  });

  test('an event loop blocked for seconds is reported dead', async () => {
    // SIGSTOP freezes the whole agent for 6 s, as a stuck synchronous call would; afterwards the
    // event-loop delay it measured is over the bound.
    await run('kill', ['-STOP', String(node.agentPid)]);
    await new Promise((r) => setTimeout(r, 6000));
    await run('kill', ['-CONT', String(node.agentPid)]);
    await new Promise((r) => setTimeout(r, 200));
    const live = await get(node.nodeNs, '/livez');
    assert.equal(live.status, 503, JSON.stringify(live.body));
    assert.match(String((live.body.checks as Record<string, string>).eventLoop), /blocked for \d+ ms/);
  });
});
