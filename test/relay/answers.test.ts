/**
 * What the relay tells a person who runs it by hand and a runtime that calls it wrongly (issue 29):
 * usage and version for a person, a whole conflist refused, errors labelled with a version podwire
 * speaks, every answer ending with a newline.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import {
  buildRelay,
  CNI_ENV,
  config,
  HAVE_CC,
  parseError,
  RELAY,
  runRelay,
  startAgent,
  tempDir,
} from './harness.js';

describe('podwire-cni relay: what a person and a misconfigured runtime are told (issue 29)', {
  skip: HAVE_CC ? false : 'no C compiler (cc) to build relay/',
}, () => {
  before(() => {
    buildRelay();
  });

  // Depends on `answer_person` (podwire-cni.c, main()): the old relay read stdin and, with no
  // CNI_COMMAND, relayed to the default socket (code 11, exit 1).
  test('`--help` and `version`: usage for a person on stdout, exit 0, nothing relayed', async (t) => {
    for (const arg of ['--help', '-h', 'help']) {
      const r = spawnSync(RELAY, [arg], { env: {}, input: '', encoding: 'utf8' });
      assert.equal(r.status, 0, `${arg}: ${r.stderr}`);
      assert.match(r.stdout, /^usage: CNI_COMMAND=ADD\|DEL\|CHECK\|GC\|STATUS\|VERSION /);
      assert.match(r.stdout, /relays the call to the podwire agent/);
      assert.equal(r.stderr, '');
    }
    for (const arg of ['version', '--version']) {
      const r = spawnSync(RELAY, [arg], { env: {}, input: '', encoding: 'utf8' });
      assert.equal(r.status, 0, `${arg}: ${r.stderr}`);
      assert.match(
        r.stdout,
        /^podwire-cni: the CNI plugin of podwire.*\nCNI spec versions: 0\.3\.0 0\.3\.1 0\.4\.0 1\.0\.0 1\.1\.0\n$/,
      );
    }
    // With an agent there, still nothing is sent to it.
    const sock = join(tempDir(t), 'agent.sock');
    const agent = await startAgent(t, sock, { kind: 'answer', status: 0, stdout: Buffer.from('{}') });
    const r = spawnSync(RELAY, ['--help'], { env: CNI_ENV, input: config(sock), encoding: 'utf8' });
    assert.equal(r.status, 0);
    assert.equal(agent.connections, 0);
  });

  // Depends on `config.is_list` (podwire-cni.c, scan_member and scan_config): the old relay took the
  // list for a plugin config and relayed it to the default socket, the "socket" in plugins[] unseen.
  test('a whole conflist on stdin: refused with code 7 saying so, nothing sent', async (t) => {
    const sock = join(tempDir(t), 'agent.sock');
    const agent = await startAgent(t, sock, { kind: 'answer', status: 0, stdout: Buffer.from('{}') });
    const list = JSON.stringify({
      cniVersion: '1.0.0',
      name: 'podwire',
      plugins: [
        { type: 'podwire-cni', socket: sock },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    });
    const err = parseError(await runRelay(CNI_ENV, list));
    assert.equal(err.code, 7);
    assert.equal(err.cniVersion, '1.0.0');
    assert.match(
      err.msg,
      /^network config on stdin is a whole network list \(a conflist: it has "plugins": \[\.\.\.\]\), not one plugin's config; .*pass podwire's entry alone$/,
    );
    assert.equal(agent.connections, 0);
    // A plugin config with a "plugins" key that is not a list is a plugin config.
    const one = await runRelay(CNI_ENV, config(sock, { plugins: 'not a list' }));
    assert.equal(one.status, 0, one.stderr);
  });

  // Depends on `supported_version` in fail() (podwire-cni.c): the old relay labelled its error with
  // the config's version whatever it was, "9.9.9" included.
  test("an error for a config of a version podwire does not speak is labelled with podwire's, not that one", async (t) => {
    const dir = tempDir(t);
    for (const version of ['9.9.9', '0.2.0', '']) {
      const err = parseError(
        await runRelay(CNI_ENV, config(join(dir, 'absent.sock'), { cniVersion: version })),
      );
      assert.equal(err.code, 11);
      assert.equal(err.cniVersion, '1.1.0', `config cniVersion ${JSON.stringify(version)}`);
    }
    // A supported one is kept.
    const err = parseError(
      await runRelay(CNI_ENV, config(join(dir, 'absent.sock'), { cniVersion: '0.4.0' })),
    );
    assert.equal(err.cniVersion, '0.4.0');
  });

  // Depends on the "\n" after the object in fail() and answer_version() (podwire-cni.c).
  test("the relay's own answers end with a newline", async (t) => {
    const err = await runRelay(CNI_ENV, config(join(tempDir(t), 'absent.sock')));
    assert.equal(err.status, 1);
    assert.match(err.stdout.toString(), /^\{.*\}\n$/);
    const version = await runRelay({ CNI_COMMAND: 'VERSION' }, '{"cniVersion":"1.0.0"}');
    assert.equal(version.status, 0, version.stderr);
    assert.equal(
      version.stdout.toString(),
      '{"cniVersion":"1.0.0","supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]}\n',
    );
  });
});
