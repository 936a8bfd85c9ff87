/**
 * Bad input (I6): everything a runtime can get wrong gets the spec's error code and a message naming
 * the field, and leaves nothing behind: no host veth, no allocation, and the agent keeps serving.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { must } from '../../bed/exec.js';
import { hostVeths } from '../../bed/inspect.js';
import { netnsPath } from '../../bed/namespaces.js';
import { type CniCall, TestNode } from '../../bed/node.js';

const node = new TestNode({ podCIDRs: ['10.244.9.0/24'] });
let pod = '';
before(async () => {
  await node.setup();
  pod = await node.addPod('bad');
});
after(() => node.cleanup());

interface Case {
  name: string;
  call: () => CniCall;
  code: number;
  /** The message must mention this. */
  names: RegExp;
}

const CASES: Case[] = [
  {
    name: 'missing CNI_COMMAND',
    call: () => ({ command: 'ADD', containerId: 'c1', netns: pod, env: { CNI_COMMAND: undefined } }),
    code: 4,
    names: /CNI_COMMAND/,
  },
  {
    name: 'unknown CNI_COMMAND',
    call: () => ({ command: 'ADD', containerId: 'c1', netns: pod, env: { CNI_COMMAND: 'ATTACH' } }),
    code: 4,
    names: /CNI_COMMAND/,
  },
  {
    name: 'missing CNI_CONTAINERID',
    call: () => ({ command: 'ADD', netns: pod, ifname: 'eth0' }),
    code: 4,
    names: /CNI_CONTAINERID/,
  },
  {
    name: 'malformed container ID',
    call: () => ({ command: 'ADD', containerId: '../etc', netns: pod }),
    code: 4,
    names: /CNI_CONTAINERID/,
  },
  {
    name: 'missing CNI_NETNS',
    call: () => ({ command: 'ADD', containerId: 'c1' }),
    code: 4,
    names: /CNI_NETNS/,
  },
  {
    name: 'relative CNI_NETNS',
    call: () => ({ command: 'ADD', containerId: 'c1', netns: 'x', env: { CNI_NETNS: 'run/netns/x' } }),
    code: 4,
    names: /CNI_NETNS/,
  },
  {
    name: 'CNI_NETNS that does not exist',
    call: () => ({ command: 'ADD', containerId: 'c1', netns: '/run/netns/pwt-missing' }),
    code: 4,
    names: /CNI_NETNS/,
  },
  {
    name: "CNI_NETNS that is the node's own",
    call: () => ({ command: 'ADD', containerId: 'c1', netns: netnsPath(node.nodeNs) }),
    code: 4,
    names: /CNI_NETNS.*own/,
  },
  {
    name: 'CNI_NETNS that is not a namespace',
    call: () => ({ command: 'ADD', containerId: 'c1', netns: '/etc/hostname' }),
    code: 4,
    names: /CNI_NETNS/,
  },
  {
    name: 'ifname too long',
    call: () => ({ command: 'ADD', containerId: 'c1', netns: pod, ifname: 'a234567890123456' }),
    code: 4,
    names: /CNI_IFNAME/,
  },
  {
    name: 'ifname with a slash',
    call: () => ({ command: 'ADD', containerId: 'c1', netns: pod, ifname: 'eth/0' }),
    code: 4,
    names: /CNI_IFNAME/,
  },
  {
    name: 'invalid JSON',
    call: () => ({
      command: 'ADD',
      containerId: 'c1',
      netns: pod,
      stdin: `{"cniVersion": "1.0.0", "socket": "${node.socket}", `,
    }),
    code: 6,
    names: /JSON|decode/i,
  },
  {
    name: 'unknown cniVersion',
    call: () => ({ command: 'ADD', containerId: 'c1', netns: pod, cniVersion: '9.9.9' }),
    code: 1,
    names: /cniVersion/,
  },
  {
    name: 'missing name',
    call: () => ({ command: 'ADD', containerId: 'c1', netns: pod, conf: { name: undefined } }),
    code: 7,
    names: /name/,
  },
  {
    name: 'CHECK with 0.3.1',
    call: () => ({
      command: 'CHECK',
      containerId: 'c1',
      netns: pod,
      cniVersion: '0.3.1',
      conf: { prevResult: {} },
    }),
    code: 1,
    names: /cniVersion|CHECK/,
  },
];

describe('bad input gets the right CNI error and leaves nothing behind', () => {
  for (const c of CASES) {
    test(c.name, async () => {
      const out = await node.cni(c.call());
      assert.equal(out.code, 1, `exit code, stdout: ${out.stdout}`);
      const err = out.json as { code: number; msg: string; cniVersion: string };
      assert.equal(err.code, c.code, out.stdout);
      assert.match(err.msg, c.names);
      assert.equal(typeof err.cniVersion, 'string');
      assert.deepEqual(await hostVeths(node.nodeNs), []);
      assert.deepEqual(node.claims(), []);
    });
  }

  test('an interface that already exists in the pod: error, full rollback, the pod untouched', async () => {
    const other = await node.addPod('taken');
    await must('ip', ['-n', other, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth1']);
    const out = await node.cni({ command: 'ADD', containerId: 'c-taken', netns: other });
    assert.equal(out.code, 1, out.stdout);
    assert.equal((out.json as { code: number }).code, 103);
    assert.match((out.json as { msg: string }).msg, /CNI_IFNAME: eth0 already exists/);
    assert.deepEqual(await hostVeths(node.nodeNs), []);
    assert.deepEqual(node.claims(), []);
  });

  // Depends on the `ipam.lookup` before InterfaceExistsError in cmd-add.ts: the old agent answered
  // 103 ("eth0 already exists") in the same namespace, and 102 only when the second ADD named another.
  test('the same attachment ADDed twice, in the same or another namespace: 102 naming the address it holds; the first keeps it', async () => {
    const first = await node.cni({ command: 'ADD', containerId: 'twice', netns: pod });
    assert.equal(first.code, 0, first.stdout);
    const ip = (first.json as { ips: Array<{ address: string }> }).ips[0]?.address.split('/')[0] as string;
    const elsewhere = await node.addPod('twice-2');
    for (const netns of [pod, elsewhere]) {
      const second = await node.cni({ command: 'ADD', containerId: 'twice', netns });
      assert.equal(second.code, 1);
      const err = second.json as { code: number; msg: string };
      assert.equal(err.code, 102, `netns ${netns}: ${second.stdout}`);
      assert.match(
        err.msg,
        new RegExp(`^container twice interface eth0 already holds ${ip.replaceAll('.', '\\.')}\\b`),
      );
      assert.equal(node.claims().length, 1);
      assert.equal((await hostVeths(node.nodeNs)).length, 1);
    }
    const del = await node.cni({ command: 'DEL', containerId: 'twice', netns: pod });
    assert.equal(del.code, 0, del.stdout);
    assert.deepEqual(node.claims(), []);
  });

  // Depends on versionHint's isSupportedVersion (cni-dispatch.ts) and the newline in CniServer's
  // #reply: the old agent labelled the refusal of 9.9.9 as a 9.9.9 object, and printed no newline.
  test("the refusal of an unsupported version is labelled with podwire's version; answers end with a newline", async () => {
    const out = await node.cni({ command: 'ADD', containerId: 'c1', netns: pod, cniVersion: '9.9.9' });
    assert.equal(out.code, 1, out.stdout);
    assert.deepEqual(
      { ...(out.json as object), msg: undefined },
      { cniVersion: '1.1.0', code: 1, msg: undefined },
    );
    assert.match((out.json as { msg: string }).msg, /9\.9\.9/);
    assert.ok(out.stdout.endsWith('}\n'), JSON.stringify(out.stdout));
    const add = await node.cni({ command: 'ADD', containerId: 'newline', netns: pod, cniVersion: '0.4.0' });
    assert.equal(add.code, 0, add.stdout);
    assert.ok(add.stdout.endsWith('}\n'), JSON.stringify(add.stdout));
    assert.equal((add.json as { cniVersion: string }).cniVersion, '0.4.0');
    assert.equal((await node.cni({ command: 'DEL', containerId: 'newline', netns: pod })).code, 0);
  });

  test('the agent still serves after all of the above', async () => {
    const add = await node.cni({ command: 'ADD', containerId: 'after-all', netns: pod });
    assert.equal(add.code, 0, add.stdout);
    assert.equal((await node.cni({ command: 'DEL', containerId: 'after-all', netns: pod })).code, 0);
  });
});
