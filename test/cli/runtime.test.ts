/** bin/podwire starts Node the way src/agent/runtime.ts says the agent needs. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { ROOT } from '../../bed/node.js';
import {
  AGENT_NODE_FLAGS,
  AGENT_THREADPOOL_SIZE,
  idleGcWarning,
  threadpoolWarning,
} from '../../src/agent/runtime.js';

test('bin/podwire sets the thread pool and the node flags of runtime.ts', () => {
  const script = readFileSync(`${ROOT}/bin/podwire`, 'utf8');
  assert.match(
    script,
    new RegExp(`UV_THREADPOOL_SIZE=\\$\\{UV_THREADPOOL_SIZE:-${AGENT_THREADPOOL_SIZE}\\}`),
  );
  const exec = /^exec node (.*)$/m.exec(script)?.[1]?.split(' ') ?? [];
  for (const flag of AGENT_NODE_FLAGS)
    assert.ok(exec.includes(flag), `${flag} not in: exec node ${exec.join(' ')}`);
});

test('the agent warns when started with a small thread pool', () => {
  assert.match(threadpoolWarning({}) ?? '', /4 threads/);
  assert.match(threadpoolWarning({ UV_THREADPOOL_SIZE: '16' }) ?? '', /16 threads/);
  assert.equal(threadpoolWarning({ UV_THREADPOOL_SIZE: String(AGENT_THREADPOOL_SIZE) }), undefined);
});

test('the agent warns when node does not expose the collection it runs when idle', () => {
  assert.match(idleGcWarning(false) ?? '', /--expose-gc/);
  assert.equal(idleGcWarning(true), undefined);
});
