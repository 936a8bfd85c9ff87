/**
 * The etcd store example of deploy/etcd-tls/ (issue 15, item 14 and the TLS store of finding 1),
 * checked without a cluster: the Secret and the ConfigMap validate against the Kubernetes schema with
 * no unknown field; the ConfigMap's agent.yaml parses with the agent's own parser in both of the
 * installer's modes (pod CIDRs from the Node, or leased from etcd) and names an etcd over https
 * with TLS files and a password file, never `insecure`; the DaemonSet patched with
 * daemonset-patch.yaml (strategic merge, as `kubectl patch` applies it) still validates, and every
 * file the agent's configuration names is mounted read-only in the agent from that Secret, under
 * a key the Secret holds.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { describe, test } from 'node:test';
import { DaemonSet } from 'kubernetes-models/apps/v1';
import { ConfigMap, Secret } from 'kubernetes-models/v1';
import { parse as parseYaml } from 'yaml';
import { DEFAULT_CONFIG, parseAgentConfig } from '../../src/agent/config.js';
import { parseNetConf } from '../../src/cni/config.js';
import {
  container,
  type DaemonSetObject,
  DEPLOY_DIR,
  findOne,
  type K8sObject,
  loadManifests,
  mountFor,
  type PodSpec,
} from './manifests.js';
import { unknownFields } from './unknown-fields.js';

const EXAMPLE_DIR = join(DEPLOY_DIR, 'etcd-tls');
const PATCH_FILE = 'daemonset-patch.yaml';
const example = loadManifests(EXAMPLE_DIR).filter((m) => m.file !== PATCH_FILE);
const base = loadManifests();

type SecretObject = K8sObject & {
  type?: string;
  stringData?: Record<string, string>;
  data?: Record<string, string>;
};
type ConfigMapObject = K8sObject & { data: Record<string, string> };
interface SecretVolume {
  secret?: { secretName?: string; defaultMode?: number; items?: unknown[] };
}

/** The list keys `kubectl patch --type strategic` merges by, for the lists this patch touches. */
const MERGE_KEYS: Record<string, string> = {
  containers: 'name',
  initContainers: 'name',
  volumes: 'name',
  volumeMounts: 'mountPath',
  env: 'name',
};

/** A strategic merge: objects merged key by key, keyed lists merged by their key, anything else replaced. */
function strategicMerge(target: unknown, patch: unknown, field = ''): unknown {
  const key = MERGE_KEYS[field];
  if (Array.isArray(patch) && key !== undefined && Array.isArray(target)) {
    const out = structuredClone(target) as Record<string, unknown>[];
    for (const item of patch as Record<string, unknown>[]) {
      const at = out.findIndex((x) => x[key] === item[key]);
      if (at >= 0) out[at] = strategicMerge(out[at], item) as Record<string, unknown>;
      else out.push(structuredClone(item));
    }
    return out;
  }
  if (patch !== null && typeof patch === 'object' && !Array.isArray(patch)) {
    const out: Record<string, unknown> =
      target !== null && typeof target === 'object' && !Array.isArray(target)
        ? { ...(target as Record<string, unknown>) }
        : {};
    for (const [k, v] of Object.entries(patch)) out[k] = strategicMerge(out[k], v, k);
    return out;
  }
  return structuredClone(patch);
}

const secret = findOne<SecretObject>(example, 'Secret');
const configMap = findOne<ConfigMapObject>(example, 'ConfigMap');
const patch: unknown = parseYaml(readFileSync(join(EXAMPLE_DIR, PATCH_FILE), 'utf8'));
const patched = strategicMerge(findOne<DaemonSetObject>(base, 'DaemonSet'), patch) as DaemonSetObject;
const pod: PodSpec = patched.spec.template.spec;
const agent = container(pod.containers, 'agent');
const agentYaml = configMap.data['agent.yaml'] ?? '';
const secretKeys = new Set(Object.keys({ ...secret.data, ...secret.stringData }));

describe('deploy/etcd-tls: an etcd cluster store over TLS instead of the Kubernetes API', () => {
  test('a Secret and a ConfigMap in kube-system, valid, with no unknown field; the ConfigMap replaces deploy/configmap.yaml', () => {
    assert.deepEqual(example.map((m) => m.obj.kind).sort(), ['ConfigMap', 'Secret']);
    for (const { file, obj } of example) {
      assert.equal(obj.metadata.namespace, 'kube-system', file);
      const Model = obj.kind === 'Secret' ? Secret : ConfigMap;
      new Model(obj as never).validate();
      assert.deepEqual(unknownFields(obj), [], file);
    }
    assert.equal(configMap.metadata.name, findOne(base, 'ConfigMap').metadata.name);
  });

  test('the Secret holds the CA, the client certificate and key, and the password, as placeholders', () => {
    assert.deepEqual([...secretKeys].sort(), ['ca.crt', 'password', 'tls.crt', 'tls.key']);
    for (const [k, v] of Object.entries(secret.stringData ?? {})) assert.match(v, /REPLACE/, k);
  });

  test('agent.yaml parses in both installer modes and names etcd over https with TLS and a password file', () => {
    // PODWIRE_POD_CIDRS=node: the installer adds the Node's spec.podCIDRs.
    const fromNode = parseAgentConfig(`${agentYaml}\npodCIDRs: ["10.244.7.0/24"]\n`);
    assert.deepEqual(fromNode.podCIDRs, ['10.244.7.0/24']);
    // PODWIRE_POD_CIDRS=config: as written, so the agent leases from clusterCIDRs.
    const config = parseAgentConfig(agentYaml);
    assert.deepEqual(config.podCIDRs, []);
    assert.ok(config.cluster?.pool, 'clusterCIDRs and nodeCIDRMaskSize, to lease from');
    const store = config.cluster?.store;
    assert.equal(store?.store, 'etcd');
    if (store?.store !== 'etcd') return;
    assert.ok(store.endpoints.length >= 1);
    for (const e of store.endpoints) assert.match(e, /^https:\/\//);
    assert.equal(store.insecure, undefined);
    assert.ok(store.tls?.ca && store.tls.cert && store.tls.key);
    assert.ok(store.auth?.passwordFile);
    assert.equal(config.cluster?.trafficMode, 'encap');
  });

  // The conflist's chain is the single-node one's (issue 29: the example dropped portmap and
  // bandwidth, so hostPort and the bandwidth annotations silently stopped working on several nodes;
  // podwire now declares the bandwidth capability itself, decision 42).
  test('the conflist is valid for the CNI layer, names the agent socket and chains what deploy/configmap.yaml chains', () => {
    const config = parseAgentConfig(agentYaml);
    type List = { cniVersion: string; name: string; plugins: Array<Record<string, unknown>> };
    const list = JSON.parse(configMap.data['10-podwire.conflist'] ?? '') as List;
    for (const plugin of list.plugins) {
      const conf = parseNetConf(
        JSON.stringify({ cniVersion: list.cniVersion, name: list.name, ...plugin }),
        'ADD',
      );
      if (conf.type === 'podwire') assert.equal(conf.socket ?? DEFAULT_CONFIG.socket, config.socket);
    }
    const single = JSON.parse(
      findOne<ConfigMapObject>(base, 'ConfigMap').data['10-podwire.conflist'] ?? '',
    ) as List;
    assert.deepEqual(list.plugins, single.plugins);
    assert.equal(list.cniVersion, single.cniVersion);
  });

  // PODWIRE_UPLINK=node is deploy/daemonset.yaml's own now (the Kubernetes store needs it too):
  // the patch leaves the init containers as they are, so both stores find each node's uplink.
  test("the patched installer finds each node's uplink from its InternalIP, as deploy/daemonset.yaml's does", () => {
    const install = container(pod.initContainers ?? [], 'install-cni');
    assert.equal(install.env?.find((e) => e.name === 'PODWIRE_UPLINK')?.value, 'node');
    const original = findOne<DaemonSetObject>(base, 'DaemonSet').spec.template.spec;
    assert.deepEqual(
      pod.initContainers,
      original.initContainers,
      'init containers as in deploy/daemonset.yaml',
    );
  });

  test('the patched DaemonSet validates and has no unknown field', () => {
    new DaemonSet(patched as never).validate();
    assert.deepEqual(unknownFields(patched), []);
    // The patch adds; it leaves the rest of the DaemonSet as deploy/daemonset.yaml has it.
    const original = findOne<DaemonSetObject>(base, 'DaemonSet');
    assert.equal(pod.volumes?.length, (original.spec.template.spec.volumes?.length ?? 0) + 1);
    assert.deepEqual(agent.command, container(original.spec.template.spec.containers, 'agent').command);
  });

  test('every file agent.yaml names is mounted read-only in the agent from the Secret, owner-only', () => {
    const store = parseAgentConfig(agentYaml).cluster?.store;
    assert.ok(store?.store === 'etcd');
    const files = [store.tls?.ca, store.tls?.cert, store.tls?.key, store.auth?.passwordFile];
    for (const file of files) {
      assert.ok(file !== undefined);
      const { mount, volume } = mountFor(pod, agent, file);
      const source = (volume as SecretVolume).secret;
      assert.equal(source?.secretName, secret.metadata.name, file);
      assert.equal(source?.items, undefined, 'every key, under its own name');
      assert.equal(source?.defaultMode, 0o400, file);
      assert.equal(mount.readOnly, true, file);
      assert.equal(join(mount.mountPath, basename(file)), file, `${file}: directly under the mount`);
      assert.ok(secretKeys.has(basename(file)), `${file}: the Secret has key ${basename(file)}`);
    }
  });

  test('the check catches what it is for: a patch that mounts nothing leaves the files unmounted', () => {
    const unpatched = findOne<DaemonSetObject>(base, 'DaemonSet').spec.template.spec;
    const store = parseAgentConfig(agentYaml).cluster?.store;
    assert.ok(store?.store === 'etcd' && store.tls?.ca !== undefined);
    assert.throws(
      () => mountFor(unpatched, container(unpatched.containers, 'agent'), store.tls?.ca as string),
      /nothing mounted/,
    );
  });
});
