/** The `podGuards` key of the agent configuration (issue 12, decision 17). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseAgentConfig } from '../../src/agent/config.js';

const base = 'podCIDRs: [10.244.0.0/24]\n';

test('podGuards is on unless the operator says off (either YAML spelling)', () => {
  assert.equal(parseAgentConfig(base).podGuards, 'on');
  assert.equal(parseAgentConfig(`${base}podGuards: off\n`).podGuards, 'off');
  assert.equal(parseAgentConfig(`${base}podGuards: "off"\n`).podGuards, 'off');
  assert.equal(parseAgentConfig(`${base}podGuards: false\n`).podGuards, 'off');
  assert.equal(parseAgentConfig(`${base}podGuards: on\n`).podGuards, 'on');
});

test('podGuards refuses other values, and off with OVS (whose pipeline is the guards)', () => {
  assert.throws(
    () => parseAgentConfig(`${base}podGuards: maybe\n`),
    /podGuards: "maybe" is not one of on, off/,
  );
  assert.throws(
    () => parseAgentConfig(`${base}datapath: ovs\npodGuards: off\n`),
    /podGuards: only the Linux bridge can run without its guards/,
  );
  assert.equal(parseAgentConfig(`${base}datapath: ovs\npodGuards: on\n`).podGuards, 'on');
});
