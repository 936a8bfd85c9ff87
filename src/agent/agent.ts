/**
 * The node agent's lifecycle. `Agent.start` takes the node's lock (node-lock.ts), then opens its
 * resources in order, each step pushing its undo on one `UndoStack`; if a step fails, the ones already
 * open are closed before rethrowing; `stop` drains, `destroy` stops at once. Both are idempotent.
 * What a start installs in the kernel (the bridge, the guards' tables, the masquerade) outlives a
 * failed start as it outlives a stop: the next start adopts it, as it adopts a crashed agent's.
 */
import { join } from 'node:path';
import { Announcer } from '../arp/announcer.js';
import type { PoolStore } from '../cluster/pool-store.js';
import type { Datapath } from '../datapath/datapath.js';
import { NodeLocalAllocator } from '../ipam/allocator.js';
import { FileStore } from '../ipam/file-store.js';
import type { IpamStore } from '../ipam/store.js';
import { mallocTrim } from '../kernel/libc.js';
import { Rtnetlink } from '../kernel/netlink/rtnetlink.js';
import { NetnsHandle } from '../kernel/netns.js';
import { nftIn } from '../kernel/nft.js';
import { CniDispatcher } from './cni/cni-dispatch.js';
import { CniServer } from './cni/cni-server.js';
import { syncLocalPods } from './cni/local-pods.js';
import { PodIpam } from './cni/pod-ipam.js';
import { reconcile } from './cni/reconcile.js';
import { Scheduler } from './cni/scheduler.js';
import type { AgentConfig } from './config.js';
import type { AgentContext } from './context.js';
import type { Logger } from './log.js';
import { NodeLock } from './node-lock.js';
import { controlMethods } from './ops/control-methods.js';
import { ControlServer, controlSocketPath } from './ops/control-server.js';
import { HealthServer } from './ops/health-server.js';
import { IDLE_RELEASE_QUIET_MS, IdleRelease, v8Gc } from './ops/idle-release.js';
import { CniMetrics } from './ops/metrics.js';
import { agentGauges } from './ops/metrics-gauges.js';
import { MetricsServer } from './ops/metrics-server.js';
import { openCluster, startMembership } from './startup/cluster-start.js';
import { startEgress } from './startup/egress-start.js';
import { startNodeSide } from './startup/node-side.js';
import { startPolicy } from './startup/policy-start.js';
import { startPools } from './startup/pool-start.js';
import { UndoStack } from './undo-stack.js';

/**
 * Link deletions in flight at once, each on its own netlink socket and worker thread: the kernel
 * spends ~20 ms of each waiting for RCU, and many of those waits overlap. See runtime.ts.
 */
export const ASYNC_NETLINK_SOCKETS = 32;

/** Three gratuitous ARPs, 50 ms apart (the contract; arping -U sends the same). */
export const ANNOUNCE = { rounds: 3, intervalMs: 50 } as const;

/**
 * Test seams: wrappers around the datapath and the stores the agent builds (fault injection in
 * test/agent/fault/). The agent still starts, stops and closes the wrapped objects.
 */
export interface AgentSeams {
  wrapDatapath?: (datapath: Datapath) => Datapath;
  /** `node`: the node's pod CIDRs (stateDir/ipam); `pools`: its record of pool addresses (stateDir/pool-ipam). */
  wrapIpamStore?: (store: IpamStore, which: 'node' | 'pools') => IpamStore;
  /** The cluster store's pools (cluster mode with etcd). */
  wrapPoolStore?: (pools: PoolStore) => PoolStore;
}

export class Agent {
  readonly ctx: AgentContext;
  readonly scheduler: Scheduler;
  readonly #server: CniServer;
  readonly #undo: UndoStack;
  #stopped = false;

  private constructor(ctx: AgentContext, scheduler: Scheduler, server: CniServer, undo: UndoStack) {
    this.ctx = ctx;
    this.scheduler = scheduler;
    this.#server = server;
    this.#undo = undo;
  }

  /**
   * Starts the agent's parts in order, each pushing its undo: if a step fails, what is already open
   * is closed in reverse order before the error is rethrown; `stop` unwinds the same stack.
   */
  static async start(given: AgentConfig, log: Logger, seams: AgentSeams = {}): Promise<Agent> {
    const undo = new UndoStack();
    try {
      // One agent per node, before anything is touched: a second one stops here, naming the first.
      const lock = await NodeLock.acquire({
        stateDir: given.stateDir,
        socket: given.socket,
        controlSocket: controlSocketPath(given.socket),
      });
      undo.push('node lock', () => lock.release());
      const home = NetnsHandle.current();
      undo.push('home netns handle', () => home.close());
      const nl = Rtnetlink.open({ asyncSockets: ASYNC_NETLINK_SOCKETS });
      undo.push('netlink', () => nl.close());
      // In cluster mode the pod CIDRs come from the store and the MTU pays for encapsulation.
      const clusterOpen = await openCluster(given, nl, log, undo);
      const config: AgentConfig = { ...given, podCIDRs: clusterOpen.podCIDRs, mtu: clusterOpen.mtu };
      // The datapath (and in bridging mode the uplink moved into it) before the overlay, which sends
      // through it.
      const { datapath, underlayIndex } = await startNodeSide(config, nl, log, undo, seams.wrapDatapath);
      // Egress masquerade before the membership, whose peer lists update its kept destinations.
      const egress = await startEgress(config, nftIn(), log, undo);
      const cluster = await startMembership(config, clusterOpen, nl, underlayIndex, log, undo, egress);
      const opened = await FileStore.open(join(config.stateDir, 'ipam'));
      const store = seams.wrapIpamStore ? seams.wrapIpamStore(opened, 'node') : opened;
      undo.push('IPAM store', () => store.close());
      const nodeIpam = await NodeLocalAllocator.open(config.podCIDRs, store, {
        // Once per file (allocator.ts): the address stays taken and no reconcile or GC releases it.
        onUnreadable: (c) =>
          log.warn(
            'unreadable IPAM claim: the address stays taken, its owner is unknown; remove the file once no pod uses it',
            { range: c.rangeId, ip: c.ip, file: c.where, reason: c.reason },
          ),
      });
      const wrapLocal = seams.wrapIpamStore;
      const pools = await startPools(
        cluster.pools && seams.wrapPoolStore ? seams.wrapPoolStore(cluster.pools) : cluster.pools,
        config.cluster?.nodeName ?? '',
        config.stateDir,
        log,
        undo,
        wrapLocal && ((local) => wrapLocal(local, 'pools')),
        clusterOpen.cluster?.store,
        config.podCIDRs,
      );
      const ipam = new PodIpam(nodeIpam, pools);
      const announcer = new Announcer(ANNOUNCE, (key, err) =>
        log.warn('announcement round failed', { attachment: key, err: String(err) }),
      );
      undo.push('announcer', () => announcer.cancelAll());
      const ctx: AgentContext = {
        config,
        home,
        nl,
        ipam,
        datapath,
        announcer,
        log,
        cluster: cluster.node,
        egress,
        pods: clusterOpen.cluster?.store.podCache,
      };
      await reconcile(ctx);
      // This node's pods in the pod cache from their claims, before any CNI call (decision 47).
      await syncLocalPods(ctx);
      // NetworkPolicy in force before any CNI call (decision 49).
      ctx.policy = await startPolicy(
        clusterOpen.cluster?.store,
        datapath,
        { node: config.cluster?.nodeName ?? '', stateDir: config.stateDir },
        log,
        undo,
        (denied) => {
          ctx.denyLog = denied;
        },
      );
      const release = new IdleRelease({ quietMs: IDLE_RELEASE_QUIET_MS, gc: v8Gc(), trim: mallocTrim, log });
      undo.push('idle release', () => release.close());
      const scheduler = new Scheduler(config.maxParallel, release);
      cluster.node?.yieldTo(() => scheduler.inFlight > 0);
      const metrics = new CniMetrics();
      const dispatcher = new CniDispatcher(ctx, scheduler, metrics);
      if (config.metricsAddress) {
        const server = new MetricsServer(
          [metrics.requests, metrics.duration],
          agentGauges(ctx, scheduler),
          log,
        );
        await server.listen(config.metricsAddress);
        undo.push('metrics server', () => server.close());
      }
      if (config.healthAddress) {
        const health = new HealthServer(ctx, log);
        undo.push('health server', () => health.close());
        await health.listen(config.healthAddress);
      }
      const control = new ControlServer(
        controlSocketPath(config.socket),
        controlMethods(ctx, scheduler, new Date()),
        log,
      );
      await control.listen();
      undo.push('control socket', () => control.close());
      const server = new CniServer(config.socket, (req) => dispatcher.handle(req.env, req.stdin), log);
      await server.listen();
      log.info('agent started', {
        socket: config.socket,
        datapath: datapath.kind,
        podCIDRs: config.podCIDRs,
      });
      return new Agent(ctx, scheduler, server, undo);
    } catch (err) {
      await undo.unwind(log);
      throw err;
    }
  }

  /** Stops accepting calls, waits for the ones in progress, then closes everything. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    await this.#server.close();
    // DELs answer before their veth is deleted; let those deletions finish before the sockets close.
    await this.scheduler.idle();
    await this.#undo.unwind(this.ctx.log);
    this.ctx.log.info('agent stopped');
  }

  /** Stops at once: calls in progress are cut (their relays answer "try again later"). */
  async destroy(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#server.destroy();
    await this.#undo.unwind(this.ctx.log);
  }
}
