/** The `podwire` CLI against a running agent: status, pods, ipam, gc, --json, --help, agent down. */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { run } from '../../bed/exec.js';
import { ROOT, TestNode } from '../../bed/node.js';

const CLI = `${ROOT}/bin/podwire`;
const node = new TestNode({ podCIDRs: ['10.244.13.0/24'] });
/** A container ID as runtimes make them: 64 hex digits. */
const CONTAINER_ID = 'c0ffee0123456789abcdef0123456789abcdef0123456789abcdef0123456789';
let pod = '';
before(async () => {
  await node.setup();
  pod = await node.addPod('cli');
  const add = await node.cni({
    command: 'ADD',
    containerId: CONTAINER_ID,
    netns: pod,
    env: { CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=web;K8S_POD_NAME=frontend-1' },
  });
  assert.equal(add.code, 0, add.stdout);
});
after(() => node.cleanup());

const cli = (...args: string[]) => run(CLI, [...args, '--config', node.configPath]);

describe('podwire CLI', () => {
  test('status', async () => {
    const r = await cli('status');
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /pod CIDRs: +10\.244\.13\.0\/24/);
    assert.match(r.stdout, /datapath: +linux-bridge \(ready\)/);
    assert.match(r.stdout, /pods: +1/);
    assert.match(r.stdout, /memory: +rss \d+\.\d MiB, heap used \d+\.\d MiB/);
    const j = JSON.parse((await cli('status', '--json')).stdout) as { pods: number; openDescriptors: number };
    assert.equal(j.pods, 1);
    assert.ok(j.openDescriptors > 0);
  });

  // The full container ID, pasteable into `podwire flows --pod` (which takes no prefix); the host
  // veth's column is not called HOST PORT, a Kubernetes hostPort's name (issue 29).
  test('pods: a table row with the pod, its full container ID, addresses, MAC and host veth', async () => {
    const r = await cli('pods');
    assert.equal(r.code, 0, r.stderr);
    const [header, row] = r.stdout.trim().split('\n');
    assert.match(header as string, /^POD +CONTAINER +IFACE +NETWORK +ADDRESSES +MAC +HOST VETH +AGE$/);
    assert.match(
      row as string,
      new RegExp(
        `^web/frontend-1 +${CONTAINER_ID} +eth0 +podwire +10\\.244\\.13\\.2/24 +0a:58:0a:f4:0d:02 +pw[0-9a-f]{13}#\\d+ +\\d+s$`,
      ),
    );
    const rows = JSON.parse((await cli('pods', '--json')).stdout) as Array<{
      pod: string;
      network: string;
      addresses: string[];
    }>;
    assert.deepEqual(
      rows.map((p) => [p.pod, p.network, p.addresses]),
      [['web/frontend-1', 'podwire', ['10.244.13.2/24']]],
    );
  });

  test('ipam', async () => {
    const r = await cli('ipam');
    assert.match(r.stdout, /10\.244\.13\.0\/24 +1 +253 +0\.4%/);
  });

  test('gc releases what no pod uses any more', async () => {
    await node.ns.delete(pod); // the pod's veth goes with its namespace; the address stays claimed
    const r = await cli('gc');
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /released 1 attachment/);
    assert.deepEqual(node.claims(), []);
  });

  // A single node (no cluster store): no NetworkPolicy is read, and the command says why.
  test('policy without store kubernetes: not enforced, and why; a --pod that is not NS/NAME is refused', async () => {
    const r = await cli('policy');
    assert.equal(r.code, 0, r.stderr);
    assert.equal(
      r.stdout,
      'NetworkPolicy: not enforced on this node (cluster.store is not kubernetes: no NetworkPolicy is read)\n',
    );
    const bad = await cli('policy', '--pod', 'frontend-1');
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /--pod frontend-1: give the pod as NAMESPACE\/NAME/);
  });

  test('--help on every command; unknown command and option are usage errors', async () => {
    for (const c of ['agent', 'status', 'pods', 'ipam', 'gc', 'policy']) {
      const r = await run(CLI, [c, '--help']);
      assert.equal(r.code, 0);
      assert.match(r.stdout, new RegExp(`usage: podwire ${c}`));
    }
    assert.equal((await run(CLI, ['frobnicate'])).code, 2);
    assert.equal((await run(CLI, ['pods', '--colour'])).code, 2);
  });

  test('the agent not running: a clear explanation, exit 1', async () => {
    const r = await run(CLI, ['status', '--socket', `${node.dir}/nothing.sock`]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /the podwire agent is not running/);
  });
});
