/**
 * A test cluster: N node namespaces on one underlay bridge, a cluster store (a real etcd on the
 * underlay, or a static file), and one agent per node inside its namespace, each a `TestNode`.
 * `cleanup` removes every agent, namespace, etcd and file, pass or fail (I7).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify as stringifyYaml } from 'yaml';
import { type EtcdOptions, EtcdServer } from './etcd.js';
import { KubeApiServer } from './kube-api.js';
import { TestNode } from './node.js';
import { Underlay, type UnderlayNode } from './underlay.js';

export interface ClusterOptions {
  nodes: number;
  /** `kubernetes`: a real kube-apiserver on the underlay (bed/kube-api.ts); each node's Node object is registered before its agent starts, with 10.250.n.0/24 and its underlay IP. */
  store: 'etcd' | 'file' | 'kubernetes';
  trafficMode?: 'encap' | 'noEncap';
  datapath?: 'linux-bridge' | 'ovs';
  /** Dual-stack pods: an IPv6 cluster CIDR too. */
  ipv6?: boolean;
  /** Bridging mode: each node's uplink joins its pod bridge (`bridging: {uplink: eth0}`). */
  bridging?: boolean;
  /** More agent configuration keys for every node (e.g. `metricsAddress`). */
  agentConfig?: Record<string, unknown>;
  /** The etcd: https with client certificates (bed/pki.ts), and its auth token TTL. */
  etcd?: Pick<EtcdOptions, 'tls' | 'authTokenTtl'>;
  /** Runs once etcd is up, before any agent starts (e.g. `etcd.enableAuth`). */
  prepareEtcd?: (etcd: EtcdServer) => Promise<void>;
  /** More keys of every agent's `cluster:` section (e.g. `tls`, `auth`), given the etcd. */
  storeConfig?: (etcd: EtcdServer) => Record<string, unknown>;
  /** The class of every member's node (a subclass of TestNode, e.g. one whose agent has fault seams). */
  nodeClass?: typeof TestNode;
}

export const CLUSTER_V4 = '10.250.0.0/16';
export const CLUSTER_V6 = 'fd00:10:250::/56';

export interface ClusterMember {
  name: string;
  underlay: UnderlayNode;
  node: TestNode;
}

export class TestCluster {
  readonly options: ClusterOptions;
  readonly underlay = new Underlay();
  readonly members: ClusterMember[] = [];
  readonly dir = mkdtempSync(join(tmpdir(), 'pwt-cluster-'));
  etcd: EtcdServer | undefined;
  kube: KubeApiServer | undefined;
  #count = 0;

  constructor(options: ClusterOptions) {
    this.options = options;
  }

  async setup(): Promise<this> {
    await this.underlay.setup();
    if (this.options.store === 'etcd') {
      this.etcd = await EtcdServer.start({
        netns: this.underlay.ns,
        host: this.underlay.hostIp,
        ...this.options.etcd,
      });
      await this.options.prepareEtcd?.(this.etcd);
    }
    if (this.options.store === 'kubernetes') {
      this.kube = await KubeApiServer.start({ netns: this.underlay.ns, host: this.underlay.hostIp });
      await this.kube.grantAgentReads('system:nodes');
    }
    const created: ClusterMember[] = [];
    for (let i = 0; i < this.options.nodes; i++) created.push(await this.#create());
    if (this.options.store === 'file') this.#writeFile([...this.members, ...created]);
    for (const m of created) await this.#registerNode(m);
    // Members before their agents start: `cleanup` then removes every node, the ones whose agent did
    // not start included (their directories were left in /tmp when a start failed under load). All
    // starts are awaited before the first failure is thrown, so that none is still starting when the
    // test's cleanup runs.
    this.members.push(...created);
    const started = await Promise.allSettled(created.map((m) => m.node.setup()));
    const failed = started.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    return this;
  }

  /** A new node joins: its namespace, uplink and agent (the store file is rewritten in file mode). */
  async join(): Promise<ClusterMember> {
    const m = await this.#create();
    if (this.options.store === 'file') this.#writeFile([...this.members, m]);
    await this.#registerNode(m);
    try {
      await m.node.setup();
    } catch (err) {
      // An agent that did not start (a test may expect that) leaves nothing behind either.
      await m.node.cleanup();
      await this.underlay.removeNode(m.underlay);
      throw err;
    }
    this.members.push(m);
    return m;
  }

  /** A node leaves: its agent stops, its namespace goes, its record (and CIDR) is removed. */
  async leave(m: ClusterMember, remove: () => Promise<void>): Promise<void> {
    await m.node.cleanup();
    await this.underlay.removeNode(m.underlay);
    this.members.splice(this.members.indexOf(m), 1);
    if (this.options.store === 'file') this.#writeFile(this.members);
    else await remove();
  }

  /** store kubernetes: the member's Node object, and the kubeconfig its agent reads (node credentials). */
  async #registerNode(m: ClusterMember): Promise<void> {
    const kube = this.kube;
    if (kube === undefined) return;
    const n = Number(m.name.split('-')[1]);
    await kube.registerNode(m.name, [`10.250.${n}.0/24`], m.underlay.ip);
  }

  /** The kubeconfig of a node's agent: a client certificate of `system:node:NAME` in `system:nodes`. */
  async #nodeKubeconfig(name: string): Promise<string> {
    const kube = this.kube as KubeApiServer;
    const cert = await kube.clientCert(`node-${name}`, `/CN=system:node:${name}/O=system:nodes`);
    return kube.writeKubeconfig(name, cert);
  }

  get storeConfig(): Record<string, unknown> {
    if (this.options.store === 'kubernetes') return { store: 'kubernetes' };
    if (this.options.store === 'file') return { store: 'file', path: join(this.dir, 'cluster.yaml') };
    const etcd = this.etcd as EtcdServer;
    return {
      store: 'etcd',
      endpoints: [etcd.endpoint],
      prefix: '/podwire',
      // A loaded CI machine can keep etcd's fsync busy past the 2 s default.
      requestTimeoutMs: 8000,
      // The bed's etcd listens on the underlay bridge of a namespace the test made.
      ...(etcd.endpoint.startsWith('http://') ? { insecure: true } : {}),
      ...this.options.storeConfig?.(etcd),
    };
  }

  async #create(): Promise<ClusterMember> {
    const n = this.#count++;
    const name = `node-${n}`;
    const underlay = await this.underlay.addNode(`n${n}`);
    const v6 = this.options.ipv6 ?? false;
    const config: Record<string, unknown> = {
      podCIDRs: this.options.store === 'file' ? null : undefined,
      cluster:
        this.options.store === 'kubernetes'
          ? { store: 'kubernetes', kubeconfig: await this.#nodeKubeconfig(name) }
          : this.storeConfig,
      nodeName: name,
      uplink: underlay.uplink,
      trafficMode: this.options.trafficMode ?? 'encap',
      ...(this.options.bridging ? { bridging: { uplink: underlay.uplink } } : {}),
      ...this.options.agentConfig,
    };
    if (this.options.store === 'kubernetes') config.podCIDRs = null;
    if (this.options.store === 'etcd') {
      config.podCIDRs = null;
      config.clusterCIDRs = v6 ? [CLUSTER_V4, CLUSTER_V6] : [CLUSTER_V4];
      config.nodeCIDRMaskSize = v6 ? { ipv4: 24, ipv6: 64 } : { ipv4: 24 };
    }
    const node = new (this.options.nodeClass ?? TestNode)({
      nodeNs: underlay.ns,
      config,
      datapath: this.options.datapath ?? 'linux-bridge',
    });
    return { name, underlay, node };
  }

  /** The static file: node n gets 10.250.n.0/24 (and fd00:10:250:n::/64). */
  #writeFile(members: readonly ClusterMember[]): void {
    const nodes = members.map((m) => {
      const n = Number(m.name.split('-')[1]);
      const podCIDRs = [`10.250.${n}.0/24`, ...(this.options.ipv6 ? [`fd00:10:250:${n}::/64`] : [])];
      return { name: m.name, underlayIP: m.underlay.ip, podCIDRs };
    });
    writeFileSync(join(this.dir, 'cluster.yaml'), stringifyYaml({ nodes }));
  }

  async cleanup(): Promise<void> {
    for (const m of this.members) await m.node.cleanup();
    await this.etcd?.cleanup();
    await this.kube?.cleanup();
    await this.underlay.cleanup();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
