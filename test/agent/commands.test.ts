/** VERSION, every spec version's ADD result, CHECK drift, GC and STATUS, through the relay. */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { must } from '../../bed/exec.js';
import { addressesByInterface, hostVeths } from '../../bed/inspect.js';
import { TestNode } from '../../bed/node.js';
import { SUPPORTED_VERSIONS } from '../../src/cni/versions.js';

const node = new TestNode({ podCIDRs: ['10.244.5.0/29', 'fd00:10:244:5::/64'] });
before(() => node.setup());
after(() => node.cleanup());

describe('commands', () => {
  test('VERSION lists every supported version', async () => {
    const out = await node.cni({
      command: 'VERSION',
      stdin: JSON.stringify({ cniVersion: '1.0.0', socket: node.socket }),
    });
    assert.equal(out.code, 0, out.stdout);
    assert.deepEqual(out.json, { cniVersion: '1.0.0', supportedVersions: [...SUPPORTED_VERSIONS] });
  });

  for (const version of SUPPORTED_VERSIONS) {
    test(`ADD and DEL in cniVersion ${version}`, async () => {
      const pod = await node.addPod('ver');
      const add = await node.cni({
        command: 'ADD',
        containerId: `v${version}`,
        netns: pod,
        cniVersion: version,
      });
      assert.equal(add.code, 0, add.stdout);
      const json = add.json as { cniVersion: string; ips: Array<{ version?: string; address: string }> };
      assert.equal(json.cniVersion, version);
      const legacy = version.startsWith('0.');
      for (const ip of json.ips) {
        assert.equal(
          ip.version,
          legacy ? (ip.address.includes(':') ? '6' : '4') : undefined,
          JSON.stringify(ip),
        );
      }
      if (version !== '0.3.0' && version !== '0.3.1') {
        const check = await node.cni({
          command: 'CHECK',
          containerId: `v${version}`,
          netns: pod,
          cniVersion: version,
          conf: { prevResult: json },
        });
        assert.equal(check.code, 0, check.stdout);
      }
      const del = await node.cni({
        command: 'DEL',
        containerId: `v${version}`,
        netns: pod,
        cniVersion: version,
      });
      assert.equal(del.code, 0, del.stdout);
      await node.ns.delete(pod);
    });
  }

  test('CHECK reports drift: a removed address, a changed MAC', async () => {
    const pod = await node.addPod('drift');
    const add = await node.cni({ command: 'ADD', containerId: 'drift', netns: pod });
    assert.equal(add.code, 0, add.stdout);
    const prev = add.json as { ips: Array<{ address: string }> };
    const v4 = prev.ips.find((ip) => !ip.address.includes(':'))?.address as string;
    await must('ip', ['-n', pod, 'addr', 'del', v4, 'dev', 'eth0']);
    const check = await node.cni({
      command: 'CHECK',
      containerId: 'drift',
      netns: pod,
      conf: { prevResult: prev },
    });
    assert.equal(check.code, 1);
    assert.equal((check.json as { code: number }).code, 104);
    assert.match((check.json as { msg: string }).msg, new RegExp(`address ${v4} is missing on eth0`));

    await must('ip', ['-n', pod, 'addr', 'add', v4, 'dev', 'eth0']);
    await must('ip', ['-n', pod, 'link', 'set', 'eth0', 'address', '02:00:00:00:00:99']);
    const mac = await node.cni({
      command: 'CHECK',
      containerId: 'drift',
      netns: pod,
      conf: { prevResult: prev },
    });
    assert.equal((mac.json as { code: number }).code, 104);
    assert.match((mac.json as { msg: string }).msg, /MAC 02:00:00:00:00:99/);
    assert.equal((await node.cni({ command: 'DEL', containerId: 'drift', netns: pod })).code, 0);
  });

  test('GC releases every attachment not in cni.dev/valid-attachments, and only those', async () => {
    const pods = [await node.addPod('gc0'), await node.addPod('gc1'), await node.addPod('gc2')];
    for (const [i, pod] of pods.entries()) {
      assert.equal((await node.cni({ command: 'ADD', containerId: `gc-${i}`, netns: pod })).code, 0);
    }
    const gc = await node.cni({
      command: 'GC',
      conf: { 'cni.dev/valid-attachments': [{ containerID: 'gc-1', ifname: 'eth0' }] },
    });
    assert.equal(gc.code, 0, gc.stdout);
    assert.deepEqual(
      node.claims().map((c) => c.containerId),
      ['gc-1', 'gc-1'],
    );
    assert.equal((await hostVeths(node.nodeNs)).length, 1);
    assert.equal((await addressesByInterface(pods[0] as string)).has('eth0'), false);
    assert.equal((await addressesByInterface(pods[1] as string)).get('eth0')?.length, 2);
    assert.equal((await node.cni({ command: 'DEL', containerId: 'gc-1', netns: pods[1] })).code, 0);
  });

  test('STATUS: ready; 50 when a range is exhausted; 51 when the bridge is down', async () => {
    const ok = await node.cni({ command: 'STATUS' });
    assert.equal(ok.code, 0, ok.stdout);

    // 10.244.5.0/29 has five addresses for pods.
    const pods: string[] = [];
    for (let i = 0; i < 5; i++) {
      const pod = await node.addPod(`full${i}`);
      pods.push(pod);
      assert.equal((await node.cni({ command: 'ADD', containerId: `full-${i}`, netns: pod })).code, 0);
    }
    const extra = await node.addPod('extra');
    const refused = await node.cni({ command: 'ADD', containerId: 'extra', netns: extra });
    assert.equal((refused.json as { code: number }).code, 101, refused.stdout);
    const full = await node.cni({ command: 'STATUS' });
    assert.equal((full.json as { code: number }).code, 50, full.stdout);
    for (const [i, pod] of pods.entries()) {
      assert.equal((await node.cni({ command: 'DEL', containerId: `full-${i}`, netns: pod })).code, 0);
    }

    await must('ip', ['-n', node.nodeNs, 'link', 'set', 'podwire0', 'down']);
    const down = await node.cni({ command: 'STATUS' });
    assert.equal((down.json as { code: number }).code, 51, down.stdout);
    await must('ip', ['-n', node.nodeNs, 'link', 'set', 'podwire0', 'up']);
    assert.equal((await node.cni({ command: 'STATUS' })).code, 0);
    assert.deepEqual(node.claims(), []);
  });
});
