/**
 * deploy/README.md against what it describes (issue 29): the agent's readiness and liveness text
 * names the probes the DaemonSet really has (it said `podwire status` after the probes had become
 * HTTP); the install step names as what to change keys the ConfigMap sets; the page says the cluster
 * store is the Kubernetes API, how to choose etcd instead, and the RBAC as rbac.yaml grants it.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { DEFAULT_CONFIG } from '../../src/agent/config.js';
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

// Issue 29 had the install step miss a key the ConfigMap set; now each key the step tells to change
// must be one the ConfigMap sets, or one it tells to add.
test('the install step names, as what to change, keys the ConfigMap sets (or says to add them)', () => {
  const configMap = findOne<K8sObject & { data: Record<string, string> }>(manifests, 'ConfigMap');
  const agentYaml = parseYaml(configMap.data['agent.yaml'] as string) as Record<string, unknown>;
  const step = /3\. Review `configmap\.yaml`(.*?)4\. Check a node/.exec(section('Install'))?.[1] ?? '';
  const items = step.split(' - ').slice(1);
  assert.ok(items.length >= 3, step);
  const named = items.flatMap((item) =>
    [...item.matchAll(/`([a-zA-Z]+)`/g)].map((m) => ({ key: m[1] as string, item })),
  );
  const keys = named.filter(({ key }) => key in DEFAULT_CONFIG || key === 'trafficMode');
  assert.ok(keys.length >= 4, JSON.stringify(named));
  for (const { key, item } of keys) {
    const set = key in agentYaml || key in ((agentYaml.cluster as object | undefined) ?? {});
    assert.ok(
      set || item.startsWith(`add \`${key}\``),
      `${key}: not in the ConfigMap, and "${item}" does not say to add it`,
    );
  }
  assert.ok('trafficMode' in agentYaml);
  assert.match(step, /`trafficMode`/);
});

test('the cluster store is the Kubernetes API; etcd-tls/ is the other', () => {
  const text = section('The cluster store');
  const configMap = findOne<K8sObject & { data: Record<string, string> }>(manifests, 'ConfigMap');
  const agentYaml = parseYaml(configMap.data['agent.yaml'] as string) as { cluster?: { store?: string } };
  assert.equal(agentYaml.cluster?.store, 'kubernetes');
  assert.match(text, /\*\*The cluster store is the Kubernetes API\*\* \(`cluster: \{store: kubernetes\}`/);
  assert.match(text, /\*\*An etcd of podwire's own instead\*\*: `etcd-tls\/`/);
});

test("the RBAC the page describes is rbac.yaml's ClusterRole, rule for rule", () => {
  type Rule = { apiGroups: string[]; resources: string[]; verbs: string[] };
  const role = findOne<K8sObject & { rules: Rule[] }>(manifests, 'ClusterRole');
  const row = /\n\| `rbac\.yaml` \|(.*)\|\n/.exec(README)?.[1] ?? '';
  const prose = section('The cluster store');
  const english = (verbs: string[]) =>
    verbs.length === 1 ? `${verbs[0]}` : `${verbs.slice(0, -1).join(', ')} and ${verbs.at(-1)}`;
  const names: Record<string, string> = {
    networkpolicies: 'NetworkPolicies',
    ippools: 'IPPools',
    'ippools/status': 'IPPool status',
  };
  const kind = (r: string) => names[r] ?? r[0]?.toUpperCase() + r.slice(1);
  const named = (resources: string[]) => resources.map(kind).join(' and ');
  for (const rule of role.rules) {
    const phrase = `${named(rule.resources)} ${english(rule.verbs)}`;
    assert.ok(row.includes(phrase), `the table's rbac.yaml row says "${phrase}": ${row}`);
    assert.ok(prose.includes(phrase), `"The cluster store" says "${phrase}"`);
  }
});
