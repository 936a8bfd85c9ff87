/**
 * README.md, Quick start step 3, run as written (issue 29: it called the relay with no agent running,
 * and had no CHECK or DEL). The block is taken from the README itself; only what would touch this
 * machine is moved aside: the agent runs in a throwaway node namespace, with the socket and state in
 * a temporary directory (the relay's config names that socket), and the pod namespace gets a
 * throwaway name instead of `demo`.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { run } from '../../bed/exec.js';
import { NamespaceSet, uniqueName } from '../../bed/namespaces.js';
import { ROOT } from '../../bed/node.js';

/** The shell block of step 3, its three-space indent removed. */
export function step3(readme: string): string {
  const from = readme.indexOf('\n3. Try it by hand');
  assert.ok(from >= 0, 'README has step 3');
  const open = readme.indexOf('   ```sh\n', from);
  const close = readme.indexOf('\n   ```\n', open);
  assert.ok(open > 0 && close > open, 'step 3 has a sh block');
  return readme
    .slice(open + '   ```sh\n'.length, close)
    .split('\n')
    .map((l) => l.replace(/^ {3}/, ''))
    .join('\n');
}

const namespaces = new NamespaceSet();
const dir = mkdtempSync(join(tmpdir(), 'pwt-readme-'));
let node = '';
before(async () => {
  node = await namespaces.add('readme-node');
  await run('ip', ['-n', node, 'link', 'set', 'lo', 'up']);
});
/** The PIDs of the agent the block started, if it is still there: its command line names our config. */
function agentsOf(config: string): number[] {
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0').includes(config);
      } catch {
        return false; // gone meanwhile
      }
    })
    .map(Number);
}

after(async () => {
  for (const pid of agentsOf(join(dir, 'agent.yaml'))) process.kill(pid, 'SIGTERM');
  await namespaces.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

test('README step 3: the agent first, then ADD, CHECK and DEL through the relay, all succeed', async () => {
  const pod = uniqueName('readme-pod');
  const config = readFileSync(join(ROOT, 'config/default.yaml'), 'utf8')
    .replace('/run/podwire/cni.sock', join(dir, 'cni.sock'))
    .replace('/var/lib/podwire', join(dir, 'state'));
  writeFileSync(join(dir, 'agent.yaml'), config);
  const script = step3(readFileSync(join(ROOT, 'README.md'), 'utf8'))
    .replaceAll('config/default.yaml', join(dir, 'agent.yaml'))
    .replaceAll('/tmp/podwire-agent.log', join(dir, 'agent.log'))
    .replaceAll('"type":"podwire"}', `"type":"podwire","socket":"${join(dir, 'cni.sock')}"}`)
    .replace(/\bdemo\b/g, pod);
  assert.match(script, /CNI_COMMAND=ADD/);
  assert.match(script, /CNI_COMMAND=CHECK/);
  assert.match(script, /CNI_COMMAND=DEL/);
  // The block stops its agent with `kill %1`; if it fails before that, the trap does.
  const r = await run(
    'ip',
    [
      'netns',
      'exec',
      node,
      'bash',
      '-e',
      '-c',
      `cd ${ROOT}\ntrap 'kill $(jobs -p) 2>/dev/null' EXIT\n${script}`,
    ],
    { timeoutMs: 60_000 },
  );
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /datapath: +linux-bridge \(ready\)/);
  assert.match(r.stdout, /"ips":\[\{"address":"10\.244\.1\.2\/24"/);
  assert.match(r.stdout, /1 received/);
  assert.match(r.stdout, /^CHECK ok$/m);
  assert.match(r.stdout, /^DEL ok$/m);
});
