/**
 * The Kubernetes install (deploy/), checked without a cluster: every YAML document validates against
 * the Kubernetes schema (kubernetes-models) and holds no field the API does not define; the agent
 * configuration parses with the agent's own parser and the conflist with the CNI layer's; the socket,
 * state and netns paths the agent uses are the host's, mounted; both containers run one image; the
 * RBAC grants what the agent and its installer call and nothing more; the Dockerfile copies files that exist.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { describe, test } from 'node:test';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1';
import { DaemonSet } from 'kubernetes-models/apps/v1';
import { ClusterRole, ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { ConfigMap, ServiceAccount } from 'kubernetes-models/v1';
import { DEFAULT_CONFIG, parseAgentConfig } from '../../src/agent/config.js';
import { DEFAULT_HEALTH_ADDRESS } from '../../src/agent/ops/health-server.js';
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
  volume,
} from './manifests.js';
import { unknownFields } from './unknown-fields.js';

const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  DaemonSet,
  ConfigMap,
  ServiceAccount,
  ClusterRole,
  ClusterRoleBinding,
  CustomResourceDefinition,
};
const NAMESPACE = 'kube-system';
const manifests = loadManifests();

function validate(obj: K8sObject): void {
  const Model = MODELS[obj.kind];
  if (Model === undefined) throw new Error(`no model for ${obj.kind}`);
  new Model(obj as never).validate();
}

const daemonSet = findOne<DaemonSetObject>(manifests, 'DaemonSet');
const pod: PodSpec = daemonSet.spec.template.spec;
const agent = container(pod.containers, 'agent');
const init = container(pod.initContainers, 'install-cni');
const configMap = findOne<K8sObject & { data: Record<string, string> }>(manifests, 'ConfigMap');
const agentYaml = configMap.data['agent.yaml'] ?? '';
const conflistText = configMap.data['10-podwire.conflist'] ?? '';
const installer = readFileSync(join(DEPLOY_DIR, 'install-cni.mjs'), 'utf8');
const ovsScript = readFileSync(join(DEPLOY_DIR, 'ovs-switch.mjs'), 'utf8');
const ovs = container(pod.containers, 'ovs');
const ovsModule = container(pod.initContainers, 'ovs-module');
const OVS_SCRIPT = '/opt/podwire/deploy/ovs-switch.mjs';

describe('deploy/ against the Kubernetes schema', () => {
  test('the documents are the expected objects, namespaced in kube-system', () => {
    const kinds = manifests.map((m) => m.obj.kind).sort();
    assert.deepEqual(kinds, [
      'ClusterRole',
      'ClusterRoleBinding',
      'ConfigMap',
      'CustomResourceDefinition',
      'DaemonSet',
      'ServiceAccount',
    ]);
    for (const { file, obj } of manifests) {
      const clusterScoped = obj.kind.startsWith('Cluster') || obj.kind === 'CustomResourceDefinition';
      assert.equal(obj.metadata.namespace, clusterScoped ? undefined : NAMESPACE, `${file} ${obj.kind}`);
    }
  });

  for (const { file, obj } of manifests) {
    test(`${file}: ${obj.kind} ${obj.metadata.name} validates and has no unknown field`, () => {
      validate(obj);
      assert.deepEqual(unknownFields(obj), []);
    });
  }

  test('the checks catch what they are for: a wrong type, a missing field, a misspelt key', () => {
    const copy = (): DaemonSetObject => structuredClone(daemonSet);
    const wrongType = copy() as unknown as { spec: { template: { spec: Record<string, unknown> } } };
    wrongType.spec.template.spec.hostNetwork = 'yes';
    assert.throws(() => validate(wrongType as unknown as K8sObject), /hostNetwork must be boolean/);
    const noSelector = copy() as unknown as { spec: Record<string, unknown> };
    delete noSelector.spec.selector;
    assert.throws(() => validate(noSelector as unknown as K8sObject), /selector/);
    const misspelt = copy() as unknown as { spec: { template: { spec: Record<string, unknown> } } };
    misspelt.spec.template.spec.hostPid = true;
    validate(misspelt as unknown as K8sObject); // the schema lets it through ...
    assert.deepEqual(unknownFields(misspelt as unknown as K8sObject), ['.spec.template.spec.hostPid']); // ... this does not
  });
});

describe('deploy/ against podwire', () => {
  const config = parseAgentConfig(agentYaml);

  test("the ConfigMap's agent.yaml parses with the agent's own parser: the Kubernetes API as the cluster store", () => {
    assert.equal(config.datapath, 'linux-bridge');
    // In-cluster (the pod's service account), not a kubeconfig file.
    assert.deepEqual(config.cluster?.store, { store: 'kubernetes' });
    assert.equal(config.cluster?.trafficMode, 'encap');
    // No pool to lease from and no pod CIDRs of its own: every node's are its Node's spec.podCIDRs,
    // which the installer writes (PODWIRE_POD_CIDRS=node); one ConfigMap for every node.
    assert.equal(config.cluster?.pool, undefined);
    assert.deepEqual(config.podCIDRs, []);
    // So the DaemonSet must render them per node, and the uplink (the InternalIP's interface) too.
    const env = (name: string) => init.env?.find((e) => e.name === name)?.value;
    assert.equal(env('PODWIRE_POD_CIDRS'), 'node');
    assert.equal(env('PODWIRE_UPLINK'), 'node');
    // Peers' pod CIDRs come from the store, so no hand-written list of what not to masquerade.
    assert.deepEqual(config.noMasqueradeCIDRs, []);
  });

  test('the conflist is valid for the CNI layer: podwire with the agent socket and the bandwidth capability, then portmap', () => {
    const list = JSON.parse(conflistText) as {
      cniVersion: string;
      name: string;
      plugins: Array<Record<string, unknown>>;
    };
    const confs = list.plugins.map((plugin) =>
      parseNetConf(JSON.stringify({ cniVersion: list.cniVersion, name: list.name, ...plugin }), 'ADD'),
    );
    // Not the reference bandwidth plugin: it fails on podwire's host veths (decision 42).
    assert.deepEqual(
      confs.map((c) => c.type),
      ['podwire', 'portmap'],
    );
    const [podwire, portmap] = confs;
    assert.equal(podwire?.socket ?? DEFAULT_CONFIG.socket, config.socket);
    // The kubelet hands hostPorts and the bandwidth annotations to the runtime, which passes them
    // only to plugins that declare the capability: podwire shapes bandwidth itself.
    assert.deepEqual(podwire?.capabilities, { bandwidth: true });
    assert.deepEqual(portmap?.capabilities, { portMappings: true });
  });

  test('the agent runs `podwire agent --config /etc/podwire/agent.yaml`, privileged, probed on its health endpoints', () => {
    assert.deepEqual(agent.command, ['podwire', 'agent', '--config', '/etc/podwire/agent.yaml']);
    assert.equal(agent.securityContext?.privileged, true);
    // healthAddress's default (src/agent/ops/health-server.ts DEFAULT_HEALTH_ADDRESS), on loopback.
    const [host, port] = DEFAULT_HEALTH_ADDRESS.split(':');
    assert.deepEqual(agent.readinessProbe?.httpGet, { host, port: Number(port), path: '/readyz' });
    assert.deepEqual(agent.livenessProbe?.httpGet, { host, port: Number(port), path: '/livez' });
  });

  test('host network and PID namespace, on every node whatever its taints', () => {
    assert.equal(pod.hostNetwork, true);
    assert.equal(pod.hostPID, true);
    assert.ok(
      pod.tolerations?.some((t) => t.operator === 'Exists' && t.key === undefined && t.effect === undefined),
    );
    assert.deepEqual(daemonSet.spec.template.metadata.labels, {
      ...daemonSet.spec.template.metadata.labels,
      ...daemonSet.spec.selector.matchLabels,
    });
  });

  test('every container, init containers included, runs the same image', () => {
    for (const c of [...(pod.initContainers ?? []), ...pod.containers])
      assert.equal(c.image, agent.image, c.name);
    assert.ok(init.command?.includes('/opt/podwire/deploy/install-cni.mjs'));
  });

  test("every container's mounts name a volume of the pod, and every volume is mounted", () => {
    const names = (pod.volumes ?? []).map((v) => v.name);
    assert.equal(new Set(names).size, names.length, 'volume names are unique');
    const used = new Set<string>();
    for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
      const paths = (c.volumeMounts ?? []).map((m) => m.mountPath);
      assert.equal(new Set(paths).size, paths.length, `${c.name}: one mount per path`);
      for (const m of c.volumeMounts ?? []) {
        assert.ok(names.includes(m.name), `${c.name}: mount ${m.mountPath} names no volume (${m.name})`);
        used.add(m.name);
      }
    }
    assert.deepEqual(
      names.filter((n) => !used.has(n)),
      [],
      'volumes no container mounts',
    );
  });

  test("the agent's config file is the one the init container writes", () => {
    const read = mountFor(pod, agent, '/etc/podwire/agent.yaml');
    const written = mountFor(pod, init, '/etc/podwire/agent.yaml');
    assert.equal(read.mount.name, written.mount.name);
    assert.equal(read.mount.mountPath, written.mount.mountPath);
    assert.ok(read.volume.emptyDir !== undefined, 'rendered per pod, not shared through the host');
    assert.match(installer, /env\('PODWIRE_CONFIG_OUT', '\/etc\/podwire'\)/);
    const template = volume(pod, mountFor(pod, init, '/etc/podwire-config/agent.yaml').mount.name);
    assert.equal(template.configMap?.name, configMap.metadata.name);
    assert.match(installer, /env\('PODWIRE_CONFIG_IN', '\/etc\/podwire-config'\)/);
  });

  test("the socket, stateDir and netns directories are the host's, at the same paths", () => {
    const hostDirs: Array<[string, string]> = [
      [dirname(config.socket), 'socket'],
      [config.stateDir, 'stateDir'],
      ['/run/netns', 'netns'],
      ['/var/run/netns', 'netns'],
    ];
    for (const [dir, what] of hostDirs) {
      const { mount, volume: v } = mountFor(pod, agent, posix.join(dir, 'x'));
      assert.equal(mount.mountPath, dir, `${what}: ${dir} is mounted as itself`);
      assert.equal(v.hostPath?.path, dir, `${what}: ${dir} comes from the host's ${dir}`);
      assert.notEqual(mount.readOnly, true, `${what}: writable`);
    }
    for (const dir of ['/run/netns', '/var/run/netns']) {
      assert.equal(mountFor(pod, agent, `${dir}/x`).mount.mountPropagation, 'HostToContainer', dir);
    }
  });

  test("the init container writes the host's CNI directories where the installer expects them", () => {
    const cases: Array<[string, string, RegExp]> = [
      ['/host/opt/cni/bin', '/opt/cni/bin', /env\('CNI_BIN_DIR', '\/host\/opt\/cni\/bin'\)/],
      ['/host/etc/cni/net.d', '/etc/cni/net.d', /env\('CNI_NET_DIR', '\/host\/etc\/cni\/net\.d'\)/],
    ];
    for (const [inside, host, defaultInInstaller] of cases) {
      const { mount, volume: v } = mountFor(pod, init, `${inside}/x`);
      assert.equal(mount.mountPath, inside);
      assert.equal(v.hostPath?.path, host);
      assert.match(installer, defaultInInstaller);
    }
    assert.ok(
      init.env?.some((e) => e.name === 'NODE_NAME' && e.valueFrom?.fieldRef?.fieldPath === 'spec.nodeName'),
    );
    // The installer's knob for the chained plugins, spelt as it reads it, with a value it accepts.
    const plugins = init.env?.find((e) => e.name === 'PODWIRE_PLUGINS');
    assert.ok(plugins?.value === 'replace' || plugins?.value === 'keep', JSON.stringify(plugins));
    assert.match(installer, /env\('PODWIRE_PLUGINS', 'replace'\)/);
  });

  test('RBAC: the pod runs as the ServiceAccount bound to a ClusterRole with what the agent and installer call, nothing more', () => {
    const sa = findOne(manifests, 'ServiceAccount');
    const role = findOne<
      K8sObject & { rules: Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }> }
    >(manifests, 'ClusterRole');
    const binding = findOne<
      K8sObject & {
        roleRef: { kind: string; name: string };
        subjects: Array<{ kind: string; name: string; namespace: string }>;
      }
    >(manifests, 'ClusterRoleBinding');
    assert.equal(pod.serviceAccountName, sa.metadata.name);
    assert.equal(sa.metadata.namespace, daemonSet.metadata.namespace);
    assert.deepEqual(binding.roleRef, {
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: role.metadata.name,
    });
    assert.deepEqual(binding.subjects, [
      { kind: 'ServiceAccount', name: sa.metadata.name, namespace: sa.metadata.namespace },
    ]);
    // Nodes: get (the installer's GET of its own Node; the store's GET before its patch), list and
    // watch (the store's reflector), patch (the podwire.io/node annotation on its own Node).
    // Pods and Namespaces: list and watch only (the pod cache's reflectors, decision 47): no GET of
    // one object anywhere. NetworkPolicies: list and watch (the policy cache, decision 49). IPPools:
    // get (a fresh read before answering "taken" or "no such pool"), list and watch (the pool cache),
    // and a patch of their status only (the claims, decision 48), never of a pool's spec. No write
    // but the patches.
    assert.deepEqual(role.rules, [
      { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch', 'patch'] },
      { apiGroups: [''], resources: ['pods', 'namespaces'], verbs: ['list', 'watch'] },
      { apiGroups: ['networking.k8s.io'], resources: ['networkpolicies'], verbs: ['list', 'watch'] },
      { apiGroups: ['podwire.io'], resources: ['ippools'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: ['podwire.io'], resources: ['ippools/status'], verbs: ['patch'] },
    ]);
    // Every collection a reflector of the agent's lists and watches is among them (a new watch
    // without its rule would fail only on a real cluster, with 403 in the agent's log): each path
    // given as a reflector's `path: '...'` or as a `..._PATH = '...'` constant (kube-pools.ts), of
    // any version (IPPools are podwire.io/v1alpha1).
    const srcDir = join(dirname(DEPLOY_DIR), 'src', 'cluster');
    const watched = readdirSync(srcDir)
      .filter((f) => f.endsWith('.ts'))
      .flatMap((f) => [
        ...readFileSync(join(srcDir, f), 'utf8').matchAll(
          /(?:path: |_PATH = )'\/(?:api|apis\/([a-z0-9.]+))\/v[0-9]+(?:(?:alpha|beta)[0-9]+)?\/([a-z]+)'/g,
        ),
      ])
      .map((m) => `${m[1] ?? ''}/${m[2] as string}`);
    assert.deepEqual([...new Set(watched)].sort(), [
      '/namespaces',
      '/nodes',
      '/pods',
      'networking.k8s.io/networkpolicies',
      'podwire.io/ippools',
    ]);
    for (const key of watched) {
      const [group, resource] = key.split('/') as [string, string];
      const rule = role.rules.find((r) => r.apiGroups.includes(group) && r.resources.includes(resource));
      assert.ok(rule?.verbs.includes('list') && rule.verbs.includes('watch'), key);
    }
  });

  test('the Dockerfile copies files that exist, to the paths the DaemonSet runs', () => {
    const root = dirname(DEPLOY_DIR);
    const dockerfile = readFileSync(join(DEPLOY_DIR, 'Dockerfile'), 'utf8');
    const copies = [...dockerfile.matchAll(/^COPY (?!--from)(.+)$/gm)].map((m) =>
      (m[1] as string).split(/\s+/),
    );
    assert.ok(copies.length > 0);
    for (const parts of copies) {
      for (const src of parts.slice(0, -1))
        assert.ok(existsSync(join(root, src)), `COPY source ${src} is missing`);
    }
    const finalStage = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
    assert.match(finalStage, /^WORKDIR \/opt\/podwire$/m);
    assert.match(finalStage, /^COPY deploy\/install-cni\.mjs deploy\/install-cni\.mjs$/m);
    assert.match(finalStage, /^COPY bin\/podwire bin\/podwire$/m);
    assert.match(finalStage, /^ENV PATH=\/opt\/podwire\/bin:\$PATH$/m);
    // The chained plugin (portmap), from Debian's containernetworking-plugins, where the installer looks
    // for it; not the reference bandwidth plugin, which the installer refuses (decision 42).
    assert.match(dockerfile, /^FROM \S+ AS cni-plugins$/m);
    assert.match(dockerfile, /apt-get install [^\n]*\bcontainernetworking-plugins\b/);
    assert.match(finalStage, /^COPY --from=cni-plugins \/usr\/lib\/cni\/portmap cni-plugins\/$/m);
    assert.doesNotMatch(finalStage, /^COPY --from=cni-plugins [^\n]*\bbandwidth\b/m);
    assert.match(installer, /env\('PODWIRE_PLUGIN_DIR', '\/opt\/podwire\/cni-plugins'\)/);
    // The programs the agent runs: nft (src/kernel/nft.ts); ovs-ofctl and ovs-vsctl for a person on the node.
    assert.match(finalStage, /apt-get install [^\n]*\bnftables\b/);
    assert.match(finalStage, /apt-get install [^\n]*\bopenvswitch-common\b/);
    // The ovs container's daemons and tools, and the ovs-module init container's modprobe.
    assert.match(finalStage, /apt-get install [^\n]*\bopenvswitch-switch\b/);
    assert.match(finalStage, /apt-get install [^\n]*\bkmod\b/);
    assert.match(finalStage, /^COPY deploy\/ovs-switch\.mjs deploy\/ovs-switch\.mjs$/m);
  });

  test('the build context (Dockerfile.dockerignore) lets every COPY source through', () => {
    const dockerfile = readFileSync(join(DEPLOY_DIR, 'Dockerfile'), 'utf8');
    const rules = readFileSync(join(DEPLOY_DIR, 'Dockerfile.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    // The file excludes everything (`*`) and lets named paths back in (`!PATH`, a directory with its contents).
    assert.equal(rules[0], '*');
    const allowed = rules.filter((r) => r.startsWith('!')).map((r) => r.slice(1).replace(/\/$/, ''));
    const sources = [...dockerfile.matchAll(/^COPY (?!--from)(.+)$/gm)].flatMap((m) =>
      (m[1] as string).split(/\s+/).slice(0, -1),
    );
    for (const src of sources) {
      const path = src.replace(/\/$/, '');
      assert.ok(
        allowed.some((a) => path === a || path.startsWith(`${a}/`)),
        `COPY ${src}: excluded from the build context`,
      );
    }
  });
});

describe('deploy/ runs the OVS datapath, selected by one ConfigMap key', () => {
  // The ConfigMap as an operator turns OVS on: the one line `datapath: linux-bridge` becomes `datapath: ovs`.
  const datapathLine = /^datapath: linux-bridge$/m;
  const ovsYaml = agentYaml.replace(datapathLine, 'datapath: ovs');
  const ovsConfig = parseAgentConfig(ovsYaml);
  const dbSocket = ovsConfig.ovsdb.slice('unix:'.length);

  test('the key is `datapath`, once in agent.yaml; changed alone, the agent parses an OVS configuration on the defaults the DaemonSet serves', () => {
    assert.equal(agentYaml.match(new RegExp(datapathLine.source, 'gm'))?.length, 1);
    assert.equal(ovsConfig.datapath, 'ovs');
    assert.equal(
      ovsConfig.ovsDatapathType,
      'system',
      'the kernel datapath: the init container loads its module',
    );
    // The agent's default, unchanged by the ConfigMap: the DaemonSet mounts its directory.
    assert.equal(ovsConfig.ovsdb, DEFAULT_CONFIG.ovsdb);
    assert.equal(ovsConfig.ovsdb, 'unix:/run/openvswitch/db.sock');
    assert.doesNotMatch(
      agentYaml,
      /^(ovsdb|ovsDatapathType|gateway):/m,
      'no OVS key needs setting besides datapath',
    );
    // The rest of the configuration is the Linux bridge one, key for key.
    const { datapath: _a, ...rest } = ovsConfig;
    const { datapath: _b, ...bridgeRest } = parseAgentConfig(agentYaml);
    assert.deepEqual(rest, bridgeRest);
  });

  test("the ovs container and the ovs-module init container read that key from the agent's own agent.yaml, with its parser", () => {
    for (const c of [ovs, ovsModule]) {
      const read = mountFor(pod, c, '/etc/podwire/agent.yaml');
      assert.equal(read.mount.name, mountFor(pod, agent, '/etc/podwire/agent.yaml').mount.name, c.name);
      assert.equal(read.mount.readOnly, true, `${c.name}: reads, never writes, the agent's config`);
    }
    assert.match(ovsScript, /env\('PODWIRE_CONFIG', '\/etc\/podwire\/agent\.yaml'\)/);
    assert.match(ovsScript, /import \{ parseAgentConfig \} from '\.\.\/dist\/src\/agent\/config\.js';/);
    // After install-cni, which renders that file.
    const inits = (pod.initContainers ?? []).map((c) => c.name);
    assert.ok(inits.indexOf('install-cni') < inits.indexOf('ovs-module'), inits.join(', '));
  });

  test("the ovsdb socket's directory is the host's /run/openvswitch, mounted writable in the ovs container and the agent", () => {
    assert.equal(dirname(dbSocket), '/run/openvswitch');
    for (const c of [ovs, agent]) {
      const { mount, volume: v } = mountFor(pod, c, dbSocket);
      assert.equal(mount.mountPath, '/run/openvswitch', c.name);
      assert.equal(v.hostPath?.path, '/run/openvswitch', c.name);
      assert.notEqual(mount.readOnly, true, c.name);
    }
    // BRIDGE.mgmt, the agent's OpenFlow socket, is beside db.sock: the same mount.
    assert.equal(
      mountFor(pod, agent, `/run/openvswitch/${ovsConfig.bridge}.mgmt`).mount.name,
      mountFor(pod, ovs, dbSocket).mount.name,
    );
  });

  test("the database is on the host's /var/lib/openvswitch, where the script keeps conf.db", () => {
    const { mount, volume: v } = mountFor(pod, ovs, '/var/lib/openvswitch/conf.db');
    assert.equal(mount.mountPath, '/var/lib/openvswitch');
    assert.equal(v.hostPath?.path, '/var/lib/openvswitch');
    assert.equal(v.hostPath?.type, 'DirectoryOrCreate');
    assert.notEqual(mount.readOnly, true);
    assert.match(ovsScript, /env\('PODWIRE_OVS_DB_DIR', '\/var\/lib\/openvswitch'\)/);
    // The agent talks to the database over db.sock only: no second writer of conf.db.
    assert.throws(() => mountFor(pod, agent, '/var/lib/openvswitch/conf.db'), /nothing mounted/);
  });

  test('the ovs container runs the supervisor, privileged, before the agent, held by its postStart until the switch answers, probed', () => {
    assert.deepEqual(ovs.command, ['node', OVS_SCRIPT, 'run']);
    assert.equal(ovs.securityContext?.privileged, true);
    const names = pod.containers.map((c) => c.name);
    assert.ok(names.indexOf('ovs') < names.indexOf('agent'), names.join(', '));
    assert.deepEqual(ovs.lifecycle?.postStart?.exec?.command, ['node', OVS_SCRIPT, 'wait']);
    assert.deepEqual(ovs.readinessProbe?.exec?.command, ['node', OVS_SCRIPT, 'probe']);
    assert.deepEqual(ovs.livenessProbe?.exec?.command, ['node', OVS_SCRIPT, 'probe']);
    for (const cmd of ['run', 'wait', 'probe', 'load-module'])
      assert.match(ovsScript, new RegExp(`'?${cmd}'?: `));
  });

  test("the ovs-module init container runs load-module, privileged, with the host's /lib/modules read-only", () => {
    assert.deepEqual(ovsModule.command, ['node', OVS_SCRIPT, 'load-module']);
    assert.equal(ovsModule.securityContext?.privileged, true);
    const { mount, volume: v } = mountFor(pod, ovsModule, '/lib/modules/6.1.0/modules.dep');
    assert.equal(mount.mountPath, '/lib/modules');
    assert.equal(mount.readOnly, true);
    assert.equal(v.hostPath?.path, '/lib/modules');
  });
});
