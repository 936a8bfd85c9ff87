/** bin/podwire starts Node the way src/agent/runtime.ts says the agent needs. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { AGENT_NODE_FLAGS, AGENT_THREADPOOL_SIZE, threadpoolWarning } from '../../src/agent/runtime.js';
import { ROOT } from '../testbed/node.js';

test('bin/podwire sets the thread pool and the node flags of runtime.ts', () => {
  const script = readFileSync(`${ROOT}/bin/podwire`, 'utf8');
  assert.match(
    script,
    new RegExp(`UV_THREADPOOL_SIZE=\\$\\{UV_THREADPOOL_SIZE:-${AGENT_THREADPOOL_SIZE}\\}`),
  );
  for (const flag of AGENT_NODE_FLAGS) assert.ok(script.includes(`exec node ${flag}`), flag);
});

test('the agent warns when started with a small thread pool', () => {
  assert.match(threadpoolWarning({}) ?? '', /4 threads/);
  assert.match(threadpoolWarning({ UV_THREADPOOL_SIZE: '16' }) ?? '', /16 threads/);
  assert.equal(threadpoolWarning({ UV_THREADPOOL_SIZE: String(AGENT_THREADPOOL_SIZE) }), undefined);
});
