/**
 * One agent per node (node-lock.ts): a second agent, in another network namespace with the same
 * socket or in the same one with the same state directory, refuses to start naming the first's PID,
 * and touches nothing of the first's; a start that fails exits 1 at once, and what it installed before
 * the failure is adopted by the next start. Real agents, as processes, as a DaemonSet would run them.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { stringify } from 'yaml';
import { run } from '../../bed/exec.js';
import { NamespaceSet } from '../../bed/namespaces.js';
import { ROOT, TestNode } from '../../bed/node.js';

const node = new TestNode({ podCIDRs: ['10.244.12.0/24'] });
const others = new NamespaceSet();
/** The pod added through the first agent, kept across the tests. */
let firstPod = '';
after(async () => {
  await node.cleanup();
  await others.cleanup();
});

/** Runs `podwire agent` on `config` in `ns` until it exits (or 20 s); its last log line, parsed. */
async function startOther(ns: string, config: Record<string, unknown>, name: string) {
  const path = join(node.dir, `${name}.yaml`);
  writeFileSync(path, stringify(config));
  const started = Date.now();
  const r = await run(
    'nsenter',
    [`--net=/run/netns/${ns}`, `${ROOT}/bin/podwire`, 'agent', '--config', path],
    {
      timeoutMs: 20_000,
    },
  );
  const lines = r.stderr.trim().split('\n');
  const last = JSON.parse(lines.at(-1) as string) as { msg: string; err?: string; code?: string };
  return { code: r.code, last, lines, ms: Date.now() - started };
}

function podConf(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { podCIDRs: ['10.244.13.0/24'], healthAddress: 'off', ...extra };
}

test('a second agent with the same socket, in another network namespace: refused with the PID, the first serves on', async () => {
  await node.setup();
  const pod = await node.addPod('first');
  firstPod = pod;
  assert.equal((await node.cni({ command: 'ADD', containerId: 'first', netns: pod })).code, 0);
  const ns = await others.add('second');
  const second = await startOther(
    ns,
    podConf({ socket: node.socket, stateDir: join(node.dir, 'state-second') }),
    'same-socket',
  );
  assert.equal(second.code, 1);
  assert.equal(second.last.msg, 'agent failed to start');
  assert.match(
    second.last.err ?? '',
    new RegExp(
      `another podwire agent \\(PID ${node.agentPid}\\) holds ${node.dir}/agent.lock: .*socket directory \\(socket\\)`,
    ),
  );
  assert.equal(second.lines.length, 1, `nothing else was logged: ${second.lines.join('\n')}`);
  // Nothing of the second's exists: no bridge in its namespace, no state of its own.
  const links = await run('ip', ['-n', ns, '-o', 'link', 'show', 'podwire0']);
  assert.notEqual(links.code, 0, 'the second agent created no bridge');
  // The first still owns its socket and serves on it.
  assert.equal(existsSync(node.socket), true);
  const pod2 = await node.addPod('first2');
  assert.equal((await node.cni({ command: 'ADD', containerId: 'first2', netns: pod2 })).code, 0);
  assert.equal((await node.cni({ command: 'DEL', containerId: 'first2', netns: pod2 })).code, 0);
});

test('a second agent with the same state directory, in the same network namespace: refused before its reconcile', async () => {
  const claims = JSON.stringify(node.claims());
  const second = await startOther(
    node.nodeNs,
    podConf({
      podCIDRs: ['10.244.12.0/24'],
      socket: join(node.dir, 'other', 'cni.sock'),
      stateDir: join(node.dir, 'state'),
    }),
    'same-state',
  );
  assert.equal(second.code, 1);
  assert.match(
    second.last.err ?? '',
    new RegExp(
      `\\(PID ${node.agentPid}\\) holds ${node.dir}/state/agent.lock: .*state directory \\(stateDir\\)`,
    ),
  );
  assert.equal(JSON.stringify(node.claims()), claims, "the first agent's claims are untouched");
  assert.equal(existsSync(join(node.dir, 'other', 'cni.sock')), false);
  assert.equal(readFileSync(join(node.dir, 'state', 'agent.lock'), 'utf8'), `${node.agentPid}\n`);
});

test('the lock goes with the process: after a SIGKILL the next agent starts and writes its own PID', async () => {
  await node.stopAgent('SIGKILL');
  await node.startAgent();
  assert.equal(readFileSync(join(node.dir, 'state', 'agent.lock'), 'utf8'), `${node.agentPid}\n`);
  const pod = await node.addPod('after-kill');
  assert.equal((await node.cni({ command: 'ADD', containerId: 'after-kill', netns: pod })).code, 0);
  assert.equal((await node.cni({ command: 'DEL', containerId: 'after-kill', netns: pod })).code, 0);
});

test('a start that fails (health port taken) exits 1 at once naming the key; the next start adopts what it left', async () => {
  await node.stopAgent('SIGTERM');
  // Something else listens on the health port in the node's namespace.
  const holder = spawn('nsenter', [
    `--net=/run/netns/${node.nodeNs}`,
    'python3',
    '-c',
    'import socket,sys,time\ns=socket.socket()\ns.bind(("127.0.0.1",19109))\ns.listen()\nprint("up",flush=True)\ntime.sleep(60)',
  ]);
  try {
    await new Promise<void>((resolve) => holder.stdout.once('data', () => resolve()));
    const config = {
      podCIDRs: ['10.244.12.0/24'],
      socket: node.socket,
      stateDir: join(node.dir, 'state'),
      healthAddress: '127.0.0.1:19109',
    };
    const failed = await startOther(node.nodeNs, config, 'port-taken');
    assert.equal(failed.code, 1, 'exits, not left alive serving nothing');
    assert.match(
      failed.last.err ?? '',
      /^agent config: healthAddress: cannot listen on 127\.0\.0\.1:19109 \(EADDRINUSE\): another process listens there$/,
    );
    assert.equal(existsSync(node.socket), false, 'no CNI socket was left');
    // What it installed stays for the next start: the bridge, and the pod added before it still works.
    assert.equal((await run('ip', ['-n', node.nodeNs, 'link', 'show', 'podwire0'])).code, 0);
  } finally {
    holder.kill('SIGKILL');
  }
  await node.startAgent();
  assert.match(node.logs, /"agent started"/);
  const ping = await run('ip', ['netns', 'exec', firstPod, 'ping', '-c', '1', '-W', '2', '10.244.12.1']);
  assert.equal(ping.code, 0, 'the pod added before the failed start still reaches its gateway');
  assert.equal((await node.cni({ command: 'DEL', containerId: 'first', netns: firstPod })).code, 0);
});

test('the loopback interface down: the health address error says so', async () => {
  const ns = await others.add('nolo');
  const r = await startOther(
    ns,
    podConf({
      socket: join(node.dir, 'nolo', 'cni.sock'),
      stateDir: join(node.dir, 'state-nolo'),
      healthAddress: '127.0.0.1:9109',
    }),
    'no-loopback',
  );
  assert.equal(r.code, 1);
  assert.match(
    r.last.err ?? '',
    /healthAddress: cannot listen on 127\.0\.0\.1:9109 \(EADDRNOTAVAIL\): the loopback interface is down in this network namespace/,
  );
});

test('a socket whose directory is a file: refused naming the key, before anything is installed', async () => {
  const ns = await others.add('sockfile');
  const file = join(node.dir, 'not-a-dir');
  writeFileSync(file, 'x');
  mkdirSync(join(node.dir, 'state-sockfile'), { recursive: true });
  const r = await startOther(
    ns,
    podConf({ socket: join(file, 'cni.sock'), stateDir: join(node.dir, 'state-sockfile') }),
    'socket-in-file',
  );
  assert.equal(r.code, 1);
  assert.equal(r.last.err, `agent config: socket: ${file} is not a directory (the socket directory)`);
  assert.equal(r.lines.length, 1, 'nothing ran before the refusal');
  assert.notEqual((await run('ip', ['-n', ns, 'link', 'show', 'podwire0'])).code, 0, 'no bridge');
  const tables = await run('ip', ['netns', 'exec', ns, 'nft', 'list', 'tables']);
  assert.equal(tables.stdout.trim(), '', 'no nftables table');
});

test('a socket path that is a file: refused naming the key, the file left alone', async () => {
  const ns = await others.add('sockisfile');
  mkdirSync(join(node.dir, 'sockisfile'));
  const file = join(node.dir, 'sockisfile', 'cni-is-a-file');
  writeFileSync(file, 'keep me');
  const r = await startOther(
    ns,
    podConf({ socket: file, stateDir: join(node.dir, 'state-sockisfile') }),
    'socket-is-file',
  );
  assert.equal(r.code, 1);
  assert.equal(
    r.last.err,
    `agent config: socket: ${file} exists and is not a socket; the agent will not replace it`,
  );
  assert.equal(readFileSync(file, 'utf8'), 'keep me');
});
