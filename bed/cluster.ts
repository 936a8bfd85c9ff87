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
import { TestNode } from './node.js';
import { Underlay, type UnderlayNode } from './underlay.js';

export interface ClusterOptions {
  nodes: number;
  store: 'etcd' | 'file';
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
    const created: ClusterMember[] = [];
    for (let i = 0; i < this.options.nodes; i++) created.push(await this.#create());
    if (this.options.store === 'file') this.#writeFile([...this.members, ...created]);
    await Promise.all(created.map((m) => m.node.setup()));
    this.members.push(...created);
    return this;
  }

  /** A new node joins: its namespace, uplink and agent (the store file is rewritten in file mode). */
  async join(): Promise<ClusterMember> {
    const m = await this.#create();
    if (this.options.store === 'file') this.#writeFile([...this.members, m]);
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

  get storeConfig(): Record<string, unknown> {
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
      cluster: this.storeConfig,
      nodeName: name,
      uplink: underlay.uplink,
      trafficMode: this.options.trafficMode ?? 'encap',
      ...(this.options.bridging ? { bridging: { uplink: underlay.uplink } } : {}),
      ...this.options.agentConfig,
    };
    if (this.options.store === 'etcd') {
      config.podCIDRs = null;
      config.clusterCIDRs = v6 ? [CLUSTER_V4, CLUSTER_V6] : [CLUSTER_V4];
      config.nodeCIDRMaskSize = v6 ? { ipv4: 24, ipv6: 64 } : { ipv4: 24 };
    }
    const node = new TestNode({
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
    await this.underlay.cleanup();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
