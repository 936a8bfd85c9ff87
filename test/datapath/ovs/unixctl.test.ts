/**
 * ovs-vswitchd's control socket (src/datapath/ovs/unixctl.ts) against a real ovs-vswitchd: answers,
 * error replies, a socket that is not there, finding the socket from a pidfile, past a stale one. A
 * fake server beside it for what a real daemon does not do on demand: never answer, hang up, answer
 * in pieces and with another id first.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { must } from '../../../bed/exec.js';
import { NamespaceSet } from '../../../bed/namespaces.js';
import { OvsInstance, ovsAvailable } from '../../../bed/ovs.js';
import { DatapathError } from '../../../src/base/errors.js';
import { unixctl, vswitchdCommand, vswitchdControlSocket } from '../../../src/datapath/ovs/unixctl.js';
import { reportOvsSkip } from '../ovs-skip.js';
import { PYTHON } from './traffic.js';

reportOvsSkip("ovs-vswitchd's control socket");
describe("ovs-vswitchd's control socket", { skip: !ovsAvailable() }, () => {
  const spaces = new NamespaceSet();
  let ovs: OvsInstance | undefined;
  before(async () => {
    ovs = await OvsInstance.start(await spaces.add('unixctl'));
  });
  after(async () => {
    await ovs?.stop();
    await spaces.cleanup();
  });
  const control = () => vswitchdControlSocket((ovs as OvsInstance).dir);

  test('a command answers with its output, as ovs-appctl prints it', async () => {
    assert.equal(control(), join((ovs as OvsInstance).dir, 'ovs-vswitchd.ctl'));
    assert.match(await unixctl(control(), 'version'), /^ovs-vswitchd \(Open vSwitch\) \d+\.\d+/);
    assert.equal(await unixctl(control(), 'revalidator/purge'), '');
  });

  test("an unknown command or bad arguments: ovs-vswitchd's error text, as a DatapathError", async () => {
    await assert.rejects(unixctl(control(), 'no/such-command'), (e: unknown) => {
      assert.ok(e instanceof DatapathError);
      assert.match(e.message, /^ovs-appctl no\/such-command: .*"no\/such-command" is not a valid command/);
      return true;
    });
    await assert.rejects(unixctl(control(), 'revalidator/purge', ['extra', 'args']), DatapathError);
  });

  test('a stale ovs-vswitchd.ctl (nobody listens): vswitchdCommand goes on to the socket the pidfile names', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pwt-unixctl-'));
    try {
      // A socket file nobody listens on: what a killed daemon leaves.
      await must(PYTHON, [
        '-c',
        'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])',
        join(dir, 'ovs-vswitchd.ctl'),
      ]);
      writeFileSync(join(dir, 'ovs-vswitchd.pid'), '4242\n');
      symlinkSync(join((ovs as OvsInstance).dir, 'ovs-vswitchd.ctl'), join(dir, 'ovs-vswitchd.4242.ctl'));
      await assert.rejects(unixctl(join(dir, 'ovs-vswitchd.ctl'), 'version'), /ECONNREFUSED|ENOENT/);
      assert.match(await vswitchdCommand(dir, 'version'), /^ovs-vswitchd \(Open vSwitch\)/);
      rmSync(join(dir, 'ovs-vswitchd.pid'));
      await assert.rejects(vswitchdCommand(dir, 'version'), /ECONNREFUSED/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('no socket at the path: a DatapathError naming it, at once', async () => {
    const gone = join((ovs as OvsInstance).dir, 'nothing.ctl');
    await assert.rejects(unixctl(gone, 'version'), (e: unknown) => {
      assert.ok(e instanceof DatapathError);
      assert.ok(e.message.includes(gone), e.message);
      assert.match(e.message, /ENOENT/);
      return true;
    });
  });
});

test("vswitchdControlSocket: without ovs-vswitchd.ctl, ovs-vswitchd's default name from its pidfile", () => {
  const dir = mkdtempSync(join(tmpdir(), 'pwt-unixctl-'));
  try {
    assert.throws(() => vswitchdControlSocket(dir), /neither .*ovs-vswitchd\.ctl nor a pidfile/);
    writeFileSync(join(dir, 'ovs-vswitchd.pid'), '4242\n');
    assert.equal(vswitchdControlSocket(dir), join(dir, 'ovs-vswitchd.4242.ctl'));
    for (const bad of ['', 'abc\n', '0\n', '12 34\n', '../x\n']) {
      writeFileSync(join(dir, 'ovs-vswitchd.pid'), bad);
      assert.throws(() => vswitchdControlSocket(dir), /holds no PID/, JSON.stringify(bad));
    }
    writeFileSync(join(dir, 'ovs-vswitchd.ctl'), '');
    assert.equal(vswitchdControlSocket(dir), join(dir, 'ovs-vswitchd.ctl'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

describe('unixctl against a fake server', () => {
  let dir: string;
  let server: Server | undefined;
  const sockets: Socket[] = [];
  const serve = async (onRequest: (sock: Socket, request: string) => void): Promise<string> => {
    dir = mkdtempSync(join(tmpdir(), 'pwt-unixctl-'));
    const path = join(dir, 'fake.ctl');
    server = createServer((sock) => {
      sockets.push(sock);
      let got = '';
      sock.on('data', (d: Buffer) => {
        got += d.toString();
        if (got.endsWith('}')) onRequest(sock, got);
      });
    });
    await new Promise<void>((res) => server?.listen(path, res));
    return path;
  };
  const stop = async () => {
    for (const s of sockets.splice(0)) s.destroy();
    await new Promise<void>((res) => (server ? server.close(() => res()) : res()));
    server = undefined;
    rmSync(dir, { recursive: true, force: true });
  };

  test('the request is what ovs-appctl sends; an answer in pieces, after one of another id, is put together', async () => {
    let request = '';
    const path = await serve((sock, r) => {
      request = r;
      sock.write('{"id":7,"result":"not this","error":null}{"id":0,"res');
      setTimeout(() => sock.write('ult":"out \\"put\\"\\n","error":null}'), 20);
    });
    try {
      assert.equal(await unixctl(path, 'do/thing', ['a', 'b']), 'out "put"\n');
      assert.deepEqual(JSON.parse(request), { id: 0, method: 'do/thing', params: ['a', 'b'] });
    } finally {
      await stop();
    }
  });

  test('no answer: a DatapathError after the timeout, the connection closed', async () => {
    const path = await serve(() => undefined);
    try {
      await assert.rejects(unixctl(path, 'revalidator/purge', [], 200), /no answer from .* within 200 ms/);
      await new Promise((res) => setTimeout(res, 50));
      assert.ok(
        sockets.every((s) => s.destroyed || s.readableEnded),
        'the client hung up',
      );
    } finally {
      await stop();
    }
  });

  test('the server hangs up without answering, or answers with garbage: a DatapathError each', async () => {
    let path = await serve((sock) => sock.end());
    try {
      await assert.rejects(unixctl(path, 'version'), /closed without an answer/);
    } finally {
      await stop();
    }
    path = await serve((sock) => sock.write('nonsense'));
    try {
      await assert.rejects(unixctl(path, 'version'), (e: unknown) => e instanceof DatapathError);
    } finally {
      await stop();
    }
  });
});
