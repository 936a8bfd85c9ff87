/**
 * An operator's way from `podwire pods` to `podwire flows` (issue 29): the CONTAINER column holds the
 * whole container ID, and pasted into `flows --pod` it finds the pod (the column was cut to 12
 * characters, which `--pod` refused); `flows --help` names every table the output shows.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { run } from '../../bed/exec.js';
import { ROOT, TestNode } from '../../bed/node.js';
import { ovsAvailable } from '../../bed/ovs.js';
import { TABLE_NAMES } from '../../src/datapath/ovs/pipeline.js';
import { reportOvsSkip } from '../datapath/ovs-skip.js';

const CLI = `${ROOT}/bin/podwire`;
const CONTAINER_ID = 'f00dfeed0123456789abcdef0123456789abcdef0123456789abcdef01234567';

test('`flows --help` names every table of the pipeline', async () => {
  const help = await run(CLI, ['flows', '--help']);
  assert.equal(help.code, 0, help.stderr);
  for (const [id, name] of TABLE_NAMES) assert.match(help.stdout, new RegExp(`^ +${id} +${name} `, 'm'));
});

reportOvsSkip('`podwire pods` to `podwire flows --pod`');
describe('`podwire pods` to `podwire flows --pod`', { skip: !ovsAvailable() }, () => {
  const node = new TestNode({ datapath: 'ovs', podCIDRs: ['10.244.29.0/24'] });
  before(() => node.setup());
  after(() => node.cleanup());
  const cli = (...args: string[]) => run(CLI, [...args, '--config', node.configPath]);

  test('the CONTAINER column, pasted into `flows --pod`, finds the pod; the output shows only tables the help names', async () => {
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

    const help = (await cli('flows', '--help')).stdout;
    const shown = [...(await cli('flows')).stdout.matchAll(/^table (\d+) (\S+)$/gm)];
    assert.ok(shown.length >= 6, 'the pipeline has tables');
    for (const [, id, name] of shown) assert.match(help, new RegExp(`^ +${id} +${name} `, 'm'));
    assert.equal((await node.cni({ command: 'DEL', containerId: CONTAINER_ID, netns: pod })).code, 0);
  });
});
