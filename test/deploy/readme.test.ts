/**
 * deploy/README.md against what it describes (issue 29): the agent's readiness and liveness text
 * names the probes the DaemonSet really has (it said `podwire status` after the probes had become
 * HTTP); the install step lists `noMasqueradeCIDRs` among what to change; the page says plainly that
 * several nodes need a cluster store and that without one each node's pods are on their own.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import {
  container,
  type DaemonSetObject,
  DEPLOY_DIR,
  findOne,
  type K8sObject,
  loadManifests,
} from './manifests.js';

const README = readFileSync(join(DEPLOY_DIR, 'README.md'), 'utf8');
const manifests = loadManifests();
const pod = findOne<DaemonSetObject>(manifests, 'DaemonSet').spec.template.spec;

/** The text of the section under `## title`, to the next `## `. */
function section(title: string): string {
  const from = README.indexOf(`\n## ${title}\n`);
  assert.ok(from >= 0, `deploy/README.md has a section "${title}"`);
  const to = README.indexOf('\n## ', from + 1);
  return README.slice(from, to < 0 ? undefined : to).replace(/\s+/g, ' ');
}

test("the agent's readiness and liveness text names the DaemonSet's probes", () => {
  const agent = container(pod.containers, 'agent');
  const text = section('What runs on a node');
  // The agent's item: its readiness sentence runs to "Liveness:", which runs to the next item.
  const item = /\*\*`agent`\*\*(.*?)\s3\. \*\*/.exec(text)?.[1] ?? '';
  const ready = /Readiness: (.*?)Liveness:/.exec(item)?.[1] ?? '';
  const live = /Liveness: (.*)$/.exec(item)?.[1] ?? '';
  for (const [what, probe, sentence] of [
    ['readiness', agent.readinessProbe, ready],
    ['liveness', agent.livenessProbe, live],
  ] as const) {
    const get = probe?.httpGet;
    assert.ok(get, `the agent's ${what} probe is an httpGet`);
    assert.ok(sentence.includes(`GET ${get.path}`), `${what}: "${sentence}" names GET ${get.path}`);
    if (what === 'readiness')
      assert.ok(sentence.includes(`${get.host}:${get.port}`), `"${sentence}" names ${get.host}:${get.port}`);
  }
  assert.doesNotMatch(text, /Readiness: `podwire status`/);
});

test('the install step lists noMasqueradeCIDRs, which the ConfigMap sets, among what to change', () => {
  const configMap = findOne<K8sObject & { data: Record<string, string> }>(manifests, 'ConfigMap');
  const agentYaml = parseYaml(configMap.data['agent.yaml'] as string) as Record<string, unknown>;
  assert.ok('noMasqueradeCIDRs' in agentYaml);
  const step = /3\. Review `configmap\.yaml`(.*?)4\. Check a node/.exec(section('Install'))?.[1] ?? '';
  assert.match(step, /`noMasqueradeCIDRs`: it must match the cluster/);
});

test('several nodes need a cluster store; without one, each node is on its own', () => {
  const text = section('One node or several');
  assert.match(text, /Several nodes need a cluster store/);
  assert.match(text, /each node's pods are on their own/);
  assert.match(text, /`etcd-tls\/`/);
});
