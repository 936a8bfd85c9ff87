/**
 * The C relay (relay/podwire-cni.c) against a fake agent: a Node unix-socket server in a temporary
 * directory that records the request frame and sends a scripted answer; then against the agent's own
 * socket server (src/agent/cni/cni-server.ts) with a handler that runs the real parseEnv. What the
 * relay tells a person and a misconfigured runtime: answers.test.ts.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { before, describe, type TestContext, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { CniServer, decodeRequest } from '../../src/agent/cni/cni-server.js';
import { jsonLogger } from '../../src/agent/log.js';
import { PodwireError } from '../../src/base/errors.js';
import { parseEnv } from '../../src/cni/env.js';
import { toCniErrorObject } from '../../src/cni/errors.js';
import {
  buildRelay,
  CNI_ENV,
  config,
  HAVE_CC,
  OTHER_ENV,
  parseError,
  parseFrame,
  RELAY,
  ROOT,
  runRelay,
  STDIN_MAX,
  startAgent,
  tempDir,
} from './harness.js';

describe('podwire-cni relay', { skip: HAVE_CC ? false : 'no C compiler (cc) to build relay/' }, () => {
  before(() => {
    buildRelay();
    assert.ok(existsSync(join(ROOT, 'bin', 'podwire-cni')), 'make installs bin/podwire-cni');
  });

  test('relays exactly the CNI_ variables and stdin, prints the answer, exits with its status', async (t) => {
    const sock = join(tempDir(t), 'agent.sock');
    const result = Buffer.from('{"cniVersion":"1.0.0","interfaces":[{"name":"eth0"}],"ips":[]}');
    const agent = await startAgent(t, sock, { kind: 'answer', status: 0, stdout: result });
    const stdin = config(sock);
    const run = await runRelay({ ...CNI_ENV, ...OTHER_ENV }, stdin);

    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(run.stdout, result);
    assert.equal(agent.requests.length, 1);
    const frame = parseFrame(agent.requests[0] ?? Buffer.alloc(0));
    const want = Object.entries(CNI_ENV).map(([k, v]) => `${k}=${v}`);
    assert.deepEqual([...frame.env].sort(), [...want].sort());
    assert.equal(frame.stdin.toString('utf8'), stdin);
    assert.deepEqual(agent.errors, []);
  });

  test('passes a failing status and binary stdout through verbatim', async (t) => {
    const sock = join(tempDir(t), 'agent.sock');
    const stdout = Buffer.from([0x7b, 0x00, 0xff, 0x0a, 0x80, 0x7d]);
    await startAgent(t, sock, { kind: 'answer', status: 7, stdout });
    const run = await runRelay(CNI_ENV, config(sock));
    assert.equal(run.status, 7);
    assert.deepEqual(run.stdout, stdout);
  });

  test('an answer of just the status prints nothing', async (t) => {
    const sock = join(tempDir(t), 'agent.sock');
    await startAgent(t, sock, { kind: 'answer', status: 0, stdout: Buffer.alloc(0) });
    const run = await runRelay({ CNI_COMMAND: 'DEL' }, config(sock));
    assert.equal(run.status, 0, run.stderr);
    assert.equal(run.stdout.length, 0);
  });

  test('relays a config of exactly 1 MiB intact', async (t) => {
    const sock = join(tempDir(t), 'agent.sock');
    const agent = await startAgent(t, sock, { kind: 'answer', status: 0, stdout: Buffer.from('{}') });
    const small = config(sock, { pad: '' });
    const stdin = config(sock, { pad: 'x'.repeat(STDIN_MAX - Buffer.byteLength(small)) });
    assert.equal(Buffer.byteLength(stdin), STDIN_MAX);
    const run = await runRelay(CNI_ENV, stdin);
    assert.equal(run.status, 0, run.stderr);
    assert.equal(parseFrame(agent.requests[0] ?? Buffer.alloc(0)).stdin.toString('utf8'), stdin);
  });

  test('a config over 1 MiB is refused with code 7 before any connection', async (t) => {
    const sock = join(tempDir(t), 'agent.sock');
    const agent = await startAgent(t, sock, { kind: 'answer', status: 0, stdout: Buffer.alloc(0) });
    const small = config(sock, { pad: '' });
    const stdin = config(sock, { pad: 'x'.repeat(STDIN_MAX + 1 - Buffer.byteLength(small)) });
    const err = parseError(await runRelay(CNI_ENV, stdin));
    assert.equal(err.code, 7);
    assert.match(err.msg, /exceeds 1048576 bytes/);
    assert.equal(agent.connections, 0);
  });

  test('no agent at the socket path: code 11 naming the path, exit 1', async (t) => {
    const sock = join(tempDir(t), 'absent.sock');
    const err = parseError(await runRelay(CNI_ENV, config(sock)));
    assert.deepEqual(err, {
      cniVersion: '1.0.0',
      code: 11,
      msg: `podwire agent unreachable at ${sock}: No such file or directory`,
    });
  });

  test('STATUS with no agent: code 50 (plugin not available), as the spec asks of STATUS', async (t) => {
    const sock = join(tempDir(t), 'absent.sock');
    const err = parseError(await runRelay({ CNI_COMMAND: 'STATUS' }, config(sock)));
    assert.equal(err.code, 50);
    assert.match(err.msg, /unreachable/);
  });

  test('a path that is no socket: code 11 with ECONNREFUSED', async (t) => {
    const sock = join(tempDir(t), 'stale.sock');
    writeFileSync(sock, '');
    const err = parseError(await runRelay(CNI_ENV, config(sock)));
    assert.equal(err.code, 11);
    assert.equal(err.msg, `podwire agent unreachable at ${sock}: Connection refused`);
  });

  test('an agent that hangs up at once: code 11', async (t) => {
    const sock = join(tempDir(t), 'agent.sock');
    const agent = await startAgent(t, sock, { kind: 'hang-up-at-once' });
    // A large config makes the hang-up land while the relay is still sending.
    const stdin = config(sock, { pad: 'x'.repeat(512 * 1024) });
    const err = parseError(await runRelay(CNI_ENV, stdin));
    assert.equal(err.code, 11);
    assert.match(err.msg, new RegExp(`^podwire agent unreachable at ${sock}: `));
    assert.equal(agent.connections, 1);
  });

  test('an agent that reads the request and closes without an answer: code 11', async (t) => {
    const sock = join(tempDir(t), 'agent.sock');
    const agent = await startAgent(t, sock, { kind: 'hang-up-after-request' });
    const err = parseError(await runRelay(CNI_ENV, config(sock)));
    assert.equal(err.code, 11);
    assert.equal(err.msg, `podwire agent unreachable at ${sock}: connection closed without an answer`);
    assert.equal(agent.requests.length, 1);
  });

  // Depends on `fail(agent_down_code(), ...)` for an answerless close (podwire-cni.c, main()).
  test('STATUS to an agent that closes without an answer: code 50, as for an agent not there', async (t) => {
    const sock = join(tempDir(t), 'agent.sock');
    const agent = await startAgent(t, sock, { kind: 'hang-up-after-request' });
    const err = parseError(await runRelay({ CNI_COMMAND: 'STATUS' }, config(sock)));
    assert.equal(err.code, 50);
    assert.equal(err.msg, `podwire agent unreachable at ${sock}: connection closed without an answer`);
    assert.equal(agent.requests.length, 1);
  });

  // Depends on the relay reading the answer after a failed send (`send_err` in main(), podwire-cni.c)
  // and keeping the bytes read before an ECONNRESET (`errno == ECONNRESET && len > 0`). The old relay
  // reported 11 (Broken pipe / Connection reset by peer) on every run.
  test('an agent that answers and closes before reading the whole request: its answer, not 11', async (t) => {
    const sock = join(tempDir(t), 'agent.sock');
    const stdout = Buffer.from('{"cniVersion":"1.1.0","code":6,"msg":"request larger than 1114112 bytes"}');
    await startAgent(t, sock, { kind: 'answer-early', status: 1, stdout });
    const stdin = config(sock, { pad: 'x'.repeat(STDIN_MAX - 4096) });
    for (let i = 0; i < 5; i++) {
      const run = await runRelay(CNI_ENV, stdin);
      assert.equal(run.status, 1, run.stderr);
      assert.deepEqual(run.stdout.toString(), stdout.toString(), `run ${i}`);
    }
  });

  // Depends on the absolute-path check in scan_member (`value.buf[0] != '/'`, podwire-cni.c): the old
  // relay connected to agent.sock in its working directory and relayed the listener's answer.
  test('a relative "socket": code 7 naming the key, and nothing is sent', async (t) => {
    const dir = tempDir(t);
    const agent = await startAgent(t, join(dir, 'agent.sock'), {
      kind: 'answer',
      status: 0,
      stdout: Buffer.from('{}'),
    });
    const err = parseError(await runRelay(CNI_ENV, config('agent.sock'), RELAY, { cwd: dir }));
    assert.equal(err.code, 7);
    assert.equal(err.msg, 'network config field "socket" must be an absolute path');
    assert.equal(agent.connections, 0);
  });

  // Depends on the SO_PEERCRED check in connect_agent (`peer.uid != 0`, podwire-cni.c): the old relay
  // sent the frame to the nobody-owned listener and passed its made-up result on with exit 0.
  test('a listener that is not root: refused before anything is sent (11; 50 for STATUS)', {
    skip: process.getuid?.() === 0 ? false : 'needs root to run a listener as nobody',
  }, async (t) => {
    const dir = tempDir(t);
    chmodSync(dir, 0o711);
    const own = join(dir, 'nobody');
    mkdirSync(own, { mode: 0o700 });
    chownSync(own, 65534, 65534);
    const sock = join(own, 'agent.sock');
    // Answers every request with a made-up success; prints how many bytes each connection sent.
    const script = `
      const net = require('node:net');
      const answer = Buffer.from('\\0{"cniVersion":"1.0.0","ips":[{"address":"10.96.0.1/32"}]}');
      net.createServer({ allowHalfOpen: true }, (s) => {
        let n = 0;
        s.on('error', () => {});
        s.on('data', (d) => { n += d.length; });
        s.on('end', () => { process.stdout.write('frame ' + n + '\\n'); s.end(answer); });
      }).listen(process.argv[1], () => process.stdout.write('listening\\n'));`;
    const listener = spawn(
      'setpriv',
      ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, '-e', script, sock],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    t.after(async () => {
      if (listener.exitCode === null && listener.signalCode === null) {
        const exited = new Promise((resolve) => listener.once('exit', resolve));
        listener.kill();
        await exited;
      }
    });
    let out = '';
    let errText = '';
    listener.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    listener.stderr.on('data', (d: Buffer) => {
      errText += d.toString();
    });
    /** Waits until the listener has printed `text` (everything it printed so far, in order). */
    const seen = async (text: string) => {
      const deadline = Date.now() + 5000;
      while (!out.includes(text)) {
        if (Date.now() > deadline)
          throw new Error(`no ${JSON.stringify(text)} from the listener: ${out} ${errText}`);
        await sleep(20);
      }
    };
    await seen('listening\n');

    const err = parseError(await runRelay(CNI_ENV, config(sock)));
    assert.equal(err.code, 11);
    assert.equal(
      err.msg,
      `podwire agent unreachable at ${sock}: the listener there runs as uid 65534, not root; nothing sent`,
    );
    const status = parseError(await runRelay({ CNI_COMMAND: 'STATUS' }, config(sock)));
    assert.equal(status.code, 50);
    // Both connections were made (the check needs one) and closed without a byte.
    await seen('frame 0\nframe 0\n');
    assert.doesNotMatch(out, /frame [1-9]/);
  });

  /** The relay built to give up after 1 s instead of 120 s, in the test's temporary directory. */
  function quickRelay(dir: string): string {
    const out = join(dir, 'podwire-cni-1s');
    const cc = spawnSync(
      'cc',
      [
        '-O2',
        '-Wall',
        '-Wextra',
        '-Werror',
        '-DAGENT_TIMEOUT_S=1',
        '-o',
        out,
        join(ROOT, 'relay', 'podwire-cni.c'),
      ],
      { encoding: 'utf8' },
    );
    assert.equal(cc.status, 0, cc.stderr);
    return out;
  }

  test('an agent that never answers: code 11 once the receive timeout expires', async (t) => {
    const dir = tempDir(t);
    const sock = join(dir, 'agent.sock');
    const agent = await startAgent(t, sock, { kind: 'silent' });
    const started = Date.now();
    const err = parseError(await runRelay(CNI_ENV, config(sock), quickRelay(dir)));
    assert.equal(err.code, 11);
    assert.equal(err.msg, `podwire agent unreachable at ${sock}: no progress within 1 s`);
    assert.ok(Date.now() - started < 10_000);
    assert.equal(agent.requests.length, 1, 'the request was complete');
  });

  test('an agent that never reads: code 11 once the send timeout expires', async (t) => {
    const dir = tempDir(t);
    const sock = join(dir, 'agent.sock');
    await startAgent(t, sock, { kind: 'deaf' });
    const stdin = config(sock, { pad: 'x'.repeat(STDIN_MAX - 4096) });
    const err = parseError(await runRelay(CNI_ENV, stdin, quickRelay(dir)));
    assert.equal(err.code, 11);
    assert.equal(err.msg, `podwire agent unreachable at ${sock}: no progress within 1 s`);
  });

  test('error messages are JSON-escaped', async (t) => {
    const sock = join(tempDir(t), 'we"ird\\name\té.sock');
    const err = parseError(await runRelay(CNI_ENV, config(sock)));
    assert.equal(err.msg, `podwire agent unreachable at ${sock}: No such file or directory`);
  });

  test('without "socket" the default path is used', {
    skip: existsSync('/run/podwire/cni.sock'),
  }, async () => {
    const err = parseError(await runRelay(CNI_ENV, config(undefined)));
    assert.equal(err.msg, 'podwire agent unreachable at /run/podwire/cni.sock: No such file or directory');
  });

  test('without "cniVersion" errors say 1.1.0', async (t) => {
    const sock = join(tempDir(t), 'absent.sock');
    const err = parseError(await runRelay(CNI_ENV, JSON.stringify({ socket: sock })));
    assert.equal(err.cniVersion, '1.1.0');
  });

  const badConfigs: [string, string, number, RegExp][] = [
    ['empty stdin', '', 6, /not a JSON object/],
    ['an array', '[1]', 6, /not a JSON object/],
    [
      'truncated JSON',
      '{"cniVersion":"1.0.0","name":"x',
      6,
      /not valid JSON: unterminated string at byte 31/,
    ],
    ['a trailing comma', '{"cniVersion":"1.0.0",}', 6, /not valid JSON: expected a string key/],
    ['data after the object', '{"cniVersion":"1.0.0"} {}', 6, /data after the top-level object/],
    ['a bad number', '{"cniVersion":"1.0.0","mtu":01}', 6, /not valid JSON/],
    ['a non-string socket', '{"cniVersion":"1.0.0","socket":42}', 7, /"socket" must be a string/],
    ['an empty socket', '{"socket":"","cniVersion":"1.0.0"}', 7, /"socket" is empty/],
    ['a \\u escape in socket', '{"cniVersion":"1.0.0","socket":"/run/\\u0070.sock"}', 7, /\\u escapes/],
    [
      'an over-long socket',
      `{"cniVersion":"1.0.0","socket":"/${'s'.repeat(107)}"}`,
      7,
      /longer than a unix socket path/,
    ],
  ];
  for (const [what, stdin, code, msg] of badConfigs) {
    test(`${what}: code ${code}, exit 1`, async () => {
      const err = parseError(await runRelay(CNI_ENV, stdin));
      assert.equal(err.code, code);
      assert.match(err.msg, msg);
      if (stdin.includes('1.0.0') && code === 7) assert.equal(err.cniVersion, '1.0.0');
    });
  }
});

/** The agent's socket server with a handler that validates the environment as the agent does. */
async function startCniServer(t: TestContext, path: string): Promise<CniServer> {
  const server = new CniServer(
    path,
    async ({ env }) => {
      try {
        const parsed = parseEnv(env);
        return { exitCode: 0, stdout: JSON.stringify({ ifname: parsed.ifname }) };
      } catch (err) {
        return { exitCode: 1, stdout: JSON.stringify(toCniErrorObject(err, '1.0.0')) };
      }
    },
    jsonLogger(() => undefined),
  );
  await server.listen();
  t.after(() => server.close());
  return server;
}

describe("podwire-cni relay against the agent's socket server", {
  skip: HAVE_CC ? false : 'no C compiler (cc) to build relay/',
}, () => {
  before(() => {
    buildRelay();
  });

  // The agent refuses a request over MAX_REQUEST (1 MiB + 64 KiB) with code 6. Each side's fix alone
  // makes this pass: the relay reading the answer after EPIPE/ECONNRESET on send (podwire-cni.c,
  // `send_err`), and the agent reading the refused request to its end instead of destroying the
  // connection (cni-server.ts, no `sock.destroy()` after the refusal). With neither (the old code),
  // nearly every run reported 11 ("Broken pipe" or "Connection reset by peer").
  test("an environment over the agent's limit: the agent's code 6 on every run, never 11", async (t) => {
    const sock = join(tempDir(t), 'agent.sock');
    await startCniServer(t, sock);
    const pads = Object.fromEntries(
      Array.from({ length: 10 }, (_, i) => [`CNI_PAD${i}`, 'a'.repeat(100_000)]),
    );
    const stdin = config(sock, { pad: 'x'.repeat(STDIN_MAX - 4096) });
    const codes: number[] = [];
    for (let i = 0; i < 10; i++) codes.push(parseError(await runRelay({ ...CNI_ENV, ...pads }, stdin)).code);
    assert.deepEqual(codes, Array(10).fill(6));
  });

  // Depends on decodeRequest's strict decoding (cni-server.ts, `isUtf8(value)`): the old code decoded
  // leniently, and eth\xff became the valid interface name "eth\u{fffd}" (exit 0).
  test('CNI_IFNAME that is not UTF-8: code 4 naming CNI_IFNAME', async (t) => {
    const sock = join(tempDir(t), 'agent.sock');
    await startCniServer(t, sock);
    const { CNI_IFNAME: _, ...env } = CNI_ENV;
    const run = await runRelay(env, config(sock), RELAY, {
      raw: { CNI_IFNAME: Buffer.from([0x65, 0x74, 0x68, 0xff]) },
    });
    const err = parseError(run);
    assert.equal(err.code, 4);
    assert.match(err.msg, /^CNI_IFNAME: not valid UTF-8/);
  });

  test('the same relay call with a valid CNI_IFNAME is served', async (t) => {
    const sock = join(tempDir(t), 'agent.sock');
    await startCniServer(t, sock);
    const run = await runRelay(CNI_ENV, config(sock), RELAY, { raw: { CNI_IFNAME: Buffer.from('eth0') } });
    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(JSON.parse(run.stdout.toString()), { ifname: 'eth0' });
  });
});

describe("the agent's socket server", () => {
  // Depends on the agent reading a refused request to its end (cni-server.ts: after the refusal the
  // 'data' handler drops chunks, and nothing destroys the connection). The old code destroyed it once
  // the answer was out, and a sender still writing got EPIPE or ECONNRESET.
  test('an oversized request sent whole and half-closed: answered with code 6, the send never fails', async (t) => {
    const path = join(tempDir(t), 'agent.sock');
    await startCniServer(t, path);
    const frame = Buffer.concat([
      Buffer.from([0, 0, 0, 16]),
      Buffer.from('CNI_COMMAND=ADD\0'),
      Buffer.alloc(4 << 20),
    ]);
    const { bytes, error } = await new Promise<{ bytes: Buffer; error: Error | undefined }>((resolve) => {
      const sock = connect({ path, allowHalfOpen: true });
      const got: Buffer[] = [];
      let error: Error | undefined;
      sock.on('data', (d: Buffer) => got.push(d));
      sock.on('error', (err) => {
        error = err;
      });
      sock.on('close', () => resolve({ bytes: Buffer.concat(got), error }));
      sock.end(frame);
    });
    assert.equal(error, undefined);
    assert.equal(bytes[0], 1);
    const err = JSON.parse(bytes.subarray(1).toString()) as { code: number; msg: string };
    assert.equal(err.code, 6);
    assert.match(err.msg, /request larger than/);
  });

  // Depends on decodeRequest's strict decoding (cni-server.ts, `isUtf8`).
  test('decodeRequest: an entry that is not UTF-8 is ERR_INVALID_ENV naming it; valid text is kept as sent', () => {
    const frame = (env: Buffer) => {
      const head = Buffer.alloc(4);
      head.writeUInt32BE(env.length);
      return Buffer.concat([head, env, Buffer.from('{}')]);
    };
    const invalid = (env: Buffer, msg: RegExp) =>
      assert.throws(
        () => decodeRequest(frame(env)),
        (err: unknown) =>
          err instanceof PodwireError && err.code === 'ERR_INVALID_ENV' && msg.test(err.message),
      );
    invalid(Buffer.from('CNI_IFNAME=eth\xff\0', 'latin1'), /^CNI_IFNAME: not valid UTF-8/);
    // A surrogate encoded in UTF-8 (CESU-8) and an overlong '/' are not UTF-8 either.
    invalid(Buffer.from('CNI_NETNS=/x\xed\xa0\x80\0', 'latin1'), /^CNI_NETNS: not valid UTF-8/);
    invalid(Buffer.from('CNI_NETNS=\xc0\xaf\0', 'latin1'), /^CNI_NETNS: not valid UTF-8/);
    invalid(Buffer.from('CNI_\xff=x\0', 'latin1'), /name is not valid UTF-8/);
    // A leading byte-order mark is part of the value (a decoder that drops it would change the value).
    const kept = decodeRequest(frame(Buffer.from('CNI_ARGS=\ufeffK=v\0CNI_UTF8=h\u00e9llo\0')));
    assert.deepEqual(kept.env, { CNI_ARGS: '\ufeffK=v', CNI_UTF8: 'h\u00e9llo' });
  });
});
