/**
 * An operator's way from `podwire pods` to `podwire flows` (issue 29): the CONTAINER column holds the
 * whole container ID, and pasted into `flows --pod` it finds the pod (the column was cut to 12
 * characters, which `--pod` refused).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { run } from '../../bed/exec.js';
import { ROOT, TestNode } from '../../bed/node.js';
import { ovsAvailable } from '../../bed/ovs.js';
import { reportOvsSkip } from '../datapath/ovs-skip.js';

const CLI = `${ROOT}/bin/podwire`;
const CONTAINER_ID = 'f00dfeed0123456789abcdef0123456789abcdef0123456789abcdef01234567';

reportOvsSkip('`podwire pods` to `podwire flows --pod`');
describe('`podwire pods` to `podwire flows --pod`', { skip: !ovsAvailable() }, () => {
  const node = new TestNode({ datapath: 'ovs', podCIDRs: ['10.244.29.0/24'] });
  before(() => node.setup());
  after(() => node.cleanup());
  const cli = (...args: string[]) => run(CLI, [...args, '--config', node.configPath]);

  test('the CONTAINER column, pasted into `flows --pod`, finds the pod', async () => {
    const pod = await node.addPod('paste');
    const add = await node.cni({ command: 'ADD', containerId: CONTAINER_ID, netns: pod });
    assert.equal(add.code, 0, add.stdout);
    const pods = await cli('pods');
    assert.equal(pods.code, 0, pods.stderr);
    const [header, row] = pods.stdout.trim().split('\n');
    const column = (header as string).split(/ {2,}/).indexOf('CONTAINER');
    const pasted = (row as string).split(/ {2,}/)[column] as string;
    assert.equal(pasted, CONTAINER_ID);
    const flows = await cli('flows', '--pod', pasted);
    assert.equal(flows.code, 0, flows.stderr);
    assert.match(flows.stdout, new RegExp(`^pod - +container ${CONTAINER_ID} +interface eth0$`, 'm'));
    assert.equal((await node.cni({ command: 'DEL', containerId: CONTAINER_ID, netns: pod })).code, 0);
  });
});
