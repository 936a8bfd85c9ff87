/** The Prometheus endpoint: off by default; when configured, CNI counts and latency, pods, IPAM, fds. */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { run } from '../testbed/exec.js';
import { TestNode } from '../testbed/node.js';

const PORT = 19105;
const node = new TestNode({ podCIDRs: ['10.244.15.0/24'], config: { metricsAddress: `127.0.0.1:${PORT}` } });
before(() => node.setup());
after(() => node.cleanup());

/** Scrapes from inside the node namespace: the endpoint listens on the node's loopback. */
async function scrape(): Promise<string> {
  const r = await run('ip', [
    'netns',
    'exec',
    node.nodeNs,
    'curl',
    '-sf',
    `http://127.0.0.1:${PORT}/metrics`,
  ]);
  assert.equal(r.code, 0, r.stderr);
  return r.stdout;
}

function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

test('CNI calls are counted by command and result, with a latency histogram', async () => {
  const pod = await node.addPod('m');
  assert.equal((await node.cni({ command: 'ADD', containerId: 'm1', netns: pod })).code, 0);
  assert.equal((await node.cni({ command: 'ADD', containerId: 'm1', netns: pod })).code, 1); // eth0 exists
  const text = await scrape();
  assert.equal(sample(text, 'podwire_cni_requests_total{command="ADD",result="ok"}'), 1);
  assert.equal(sample(text, 'podwire_cni_requests_total{command="ADD",result="103"}'), 1);
  assert.equal(sample(text, 'podwire_cni_request_duration_seconds_count{command="ADD",result="ok"}'), 1);
  assert.equal(
    sample(text, 'podwire_cni_request_duration_seconds_bucket{command="ADD",result="ok",le="+Inf"}'),
    1,
  );
  assert.equal(sample(text, 'podwire_pods'), 1);
  assert.equal(sample(text, 'podwire_ipam_addresses_used{range="10.244.15.0/24"}'), 1);
  assert.equal(sample(text, 'podwire_ipam_addresses_size{range="10.244.15.0/24"}'), 253);
  assert.ok((sample(text, 'podwire_open_fds') ?? 0) > 0);
  assert.ok((sample(text, 'podwire_gratuitous_announcements_sent_total') ?? 0) >= 1);
  assert.match(text, /# TYPE podwire_cni_request_duration_seconds histogram/);
  assert.equal((await node.cni({ command: 'DEL', containerId: 'm1', netns: pod })).code, 0);
  assert.equal(sample(await scrape(), 'podwire_pods'), 0);
});

test('an unknown command is counted as "invalid", never as a label of its own', async () => {
  await node.cni({ command: 'ADD', containerId: 'x', env: { CNI_COMMAND: 'BOGUS' } });
  const text = await scrape();
  assert.equal(sample(text, 'podwire_cni_requests_total{command="invalid",result="4"}'), 1);
  assert.doesNotMatch(text, /BOGUS/);
});
