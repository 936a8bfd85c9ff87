/** README.md's table of the agent configuration lists every key the parser accepts, and no other. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOT } from '../../bed/node.js';
import { CONFIG_KEYS } from '../../src/agent/config.js';

test('the README configuration table names every key of the agent config', () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.split('## Agent configuration (YAML)')[1]?.split('\n## ')[0] ?? '';
  const documented = new Set([...section.matchAll(/^\| `([A-Za-z]+)`/gm)].map((m) => m[1] as string));
  assert.deepEqual(
    [...CONFIG_KEYS].filter((k) => !documented.has(k)),
    [],
    'keys the README does not list',
  );
  assert.deepEqual(
    [...documented].filter((k) => !CONFIG_KEYS.has(k)),
    [],
    'keys the parser does not accept',
  );
});
