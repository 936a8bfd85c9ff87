/**
 * ovs-vswitchd's control socket (src/datapath/ovs/unixctl.ts) against a real ovs-vswitchd: answers,
 * error replies, a socket that is not there, and finding the socket from a pidfile.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { NamespaceSet } from '../../../bed/namespaces.js';
import { OvsInstance, ovsAvailable } from '../../../bed/ovs.js';
import { DatapathError } from '../../../src/base/errors.js';
import { unixctl, vswitchdControlSocket } from '../../../src/datapath/ovs/unixctl.js';
import { reportOvsSkip } from '../ovs-skip.js';

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
