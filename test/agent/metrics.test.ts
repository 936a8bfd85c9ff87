/** The Prometheus endpoint: off by default; when configured, CNI counts and latency, pods, IPAM, fds. */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { metricSample, scrapeMetrics } from '../../bed/metrics.js';
import { TestNode } from '../../bed/node.js';

const PORT = 19105;
const node = new TestNode({ podCIDRs: ['10.244.15.0/24'], config: { metricsAddress: `127.0.0.1:${PORT}` } });
before(() => node.setup());
after(() => node.cleanup());

const scrape = () => scrapeMetrics(node.nodeNs, PORT);
const sample = metricSample;

test('CNI calls are counted by command and result, with a latency histogram', async () => {
  const pod = await node.addPod('m');
  assert.equal((await node.cni({ command: 'ADD', containerId: 'm1', netns: pod })).code, 0);
  assert.equal((await node.cni({ command: 'ADD', containerId: 'm1', netns: pod })).code, 1); // holds one
  const text = await scrape();
  assert.equal(sample(text, 'podwire_cni_requests_total{command="ADD",result="ok"}'), 1);
  assert.equal(sample(text, 'podwire_cni_requests_total{command="ADD",result="102"}'), 1);
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

test('after N ADDs and DELs the counters and histogram counts are N; descriptors match /proc', async () => {
  const N = 5;
  const before = await scrape();
  const count = (text: string, series: string) => sample(text, series) ?? 0;
  const pods = await Promise.all(Array.from({ length: N }, (_, i) => node.addPod(`n${i}`)));
  for (const [i, pod] of pods.entries()) {
    assert.equal((await node.cni({ command: 'ADD', containerId: `n${i}`, netns: pod })).code, 0);
  }
  for (const [i, pod] of pods.entries()) {
    assert.equal((await node.cni({ command: 'DEL', containerId: `n${i}`, netns: pod })).code, 0);
  }
  // Announcement sockets close on a worker thread some milliseconds after the last ADD.
  await new Promise((resolve) => setTimeout(resolve, 300));
  const text = await scrape();
  for (const command of ['ADD', 'DEL']) {
    const ok = `{command="${command}",result="ok"}`;
    assert.equal(
      count(text, `podwire_cni_requests_total${ok}`) - count(before, `podwire_cni_requests_total${ok}`),
      N,
    );
    const hist = `podwire_cni_request_duration_seconds_count${ok}`;
    assert.equal(count(text, hist) - count(before, hist), N);
  }
  // The scrape's own connection holds a descriptor while the agent counts: allow that one. Sockets
  // of recent announcements close on worker threads, so compare with /proc just before and after.
  const deadline = Date.now() + 3000;
  for (;;) {
    const before = (await node.settleFds(-1, 0)).length;
    const reported = sample(await scrape(), 'podwire_open_fds') ?? -1;
    const after = (await node.settleFds(-1, 0)).length;
    if (reported >= Math.min(before, after) && reported <= Math.max(before, after) + 1) break;
    assert.ok(Date.now() < deadline, `podwire_open_fds ${reported} vs /proc ${before}..${after}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
});

test('an unknown command is counted as "invalid", never as a label of its own', async () => {
  await node.cni({ command: 'ADD', containerId: 'x', env: { CNI_COMMAND: 'BOGUS' } });
  const text = await scrape();
  assert.equal(sample(text, 'podwire_cni_requests_total{command="invalid",result="4"}'), 1);
  assert.doesNotMatch(text, /BOGUS/);
});
