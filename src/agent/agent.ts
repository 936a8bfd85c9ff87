/**
 * The node agent's lifecycle. `Agent.start` opens its resources in order and, if any step fails,
 * closes the ones already open before rethrowing; `stop` drains, `destroy` stops at once. Both are
 * idempotent.
 */
import { join } from 'node:path';
import { Announcer } from '../arp/announcer.js';
import type { PoolStore } from '../cluster/pool-store.js';
import { PodwireError } from '../cni/errors.js';
import type { Datapath, GatewayAddress } from '../datapath/datapath.js';
import { NodeLocalAllocator } from '../ipam/allocator.js';
import { parseCidr } from '../ipam/cidr.js';
import { FileStore } from '../ipam/file-store.js';
import { formatIp } from '../ipam/ip.js';
import type { IpamStore } from '../ipam/store.js';
import { mallocTrim } from '../kernel/libc.js';
import { Rtnetlink } from '../kernel/netlink/rtnetlink.js';
import { NetnsHandle } from '../kernel/netns.js';
import { UplinkBridging } from './bridging.js';
import { startCluster } from './cluster-start.js';
import { CniDispatcher } from './cni-dispatch.js';
import { CniServer } from './cni-server.js';
import type { AgentConfig } from './config.js';
import type { AgentContext } from './context.js';
import { controlMethods } from './control-methods.js';
import { ControlServer, controlSocketPath } from './control-server.js';
import { createDatapath, gatewayInterface } from './datapath-select.js';
import { IDLE_RELEASE_QUIET_MS, IdleRelease, v8Gc } from './idle-release.js';
import type { Logger } from './log.js';
import { CniMetrics } from './metrics.js';
import { agentGauges } from './metrics-gauges.js';
import { MetricsServer } from './metrics-server.js';
import { PodIpam } from './pod-ipam.js';
import { startPools } from './pool-start.js';
import { reconcile } from './reconcile.js';
import { Scheduler } from './scheduler.js';

/**
 * Link deletions in flight at once, each on its own netlink socket and worker thread: the kernel
 * spends ~20 ms of each waiting for RCU, and many of those waits overlap. See runtime.ts.
 */
export const ASYNC_NETLINK_SOCKETS = 32;

/** Three gratuitous ARPs, 50 ms apart (the contract; arping -U sends the same). */
export const ANNOUNCE = { rounds: 3, intervalMs: 50 } as const;

export function gatewaysOf(podCIDRs: string[]): GatewayAddress[] {
  return podCIDRs.map((text) => {
    const c = parseCidr(text);
    return { family: c.family, address: formatIp(c.family, c.gateway), prefixLength: c.prefixLength };
  });
}

/**
 * Test seams: wrappers around the datapath and the IPAM stores the agent builds (fault injection in
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
  readonly #closers: Array<() => unknown>;
  #stopped = false;

  private constructor(
    ctx: AgentContext,
    scheduler: Scheduler,
    server: CniServer,
    closers: Array<() => unknown>,
  ) {
    this.ctx = ctx;
    this.scheduler = scheduler;
    this.#server = server;
    this.#closers = closers;
  }

  static async start(given: AgentConfig, log: Logger, seams: AgentSeams = {}): Promise<Agent> {
    /** Undo steps for what is open so far, run in reverse order on failure or stop. */
    const closers: Array<() => unknown> = [];
    try {
      const home = NetnsHandle.current();
      closers.push(() => home.close());
      const nl = Rtnetlink.open({ asyncSockets: ASYNC_NETLINK_SOCKETS });
      closers.push(() => nl.close());
      // The datapath (and, in bridging mode, the uplink moved into it) comes up once the pod CIDRs and
      // MTU are known: in cluster mode after the lease, before the overlay, which sends through it.
      let datapath: Datapath | undefined;
      const nodeSide = async (podCIDRs: string[], mtu: number): Promise<number | undefined> => {
        const made = createDatapath({ ...given, podCIDRs, mtu }, nl, gatewaysOf(podCIDRs), log);
        const dp = seams.wrapDatapath ? seams.wrapDatapath(made) : made;
        await dp.start();
        closers.push(() => dp.stop());
        datapath = dp;
        if (!given.bridging) {
          await UplinkBridging.restoreLeftover({
            nl,
            target: gatewayInterface(given),
            datapath: dp,
            stateDir: given.stateDir,
            log,
          });
          return undefined;
        }
        const { bridging, index } = await UplinkBridging.attach({
          nl,
          settings: given.bridging,
          target: gatewayInterface(given),
          datapath: dp,
          stateDir: given.stateDir,
          log,
        });
        closers.push(() => bridging.restore());
        return index;
      };
      // In cluster mode the pod CIDRs come from the store and the MTU pays for encapsulation.
      const cluster = await startCluster(given, nl, log, closers, nodeSide);
      const config: AgentConfig = { ...given, podCIDRs: cluster.podCIDRs, mtu: cluster.mtu };
      if (!datapath) await nodeSide(config.podCIDRs, config.mtu);
      if (!datapath) throw new PodwireError('ERR_INTERNAL', 'datapath not started');
      const opened = await FileStore.open(join(config.stateDir, 'ipam'));
      const store = seams.wrapIpamStore ? seams.wrapIpamStore(opened, 'node') : opened;
      closers.push(() => store.close());
      const nodeIpam = await NodeLocalAllocator.open(config.podCIDRs, store);
      const wrapLocal = seams.wrapIpamStore;
      const pools = await startPools(
        cluster.pools && seams.wrapPoolStore ? seams.wrapPoolStore(cluster.pools) : cluster.pools,
        config.cluster?.nodeName ?? '',
        config.stateDir,
        log,
        closers,
        wrapLocal && ((local) => wrapLocal(local, 'pools')),
      );
      const ipam = new PodIpam(nodeIpam, pools);
      const announcer = new Announcer(ANNOUNCE, (key, err) =>
        log.warn('announcement round failed', { attachment: key, err: String(err) }),
      );
      closers.push(() => announcer.cancelAll());
      const ctx: AgentContext = { config, home, nl, ipam, datapath, announcer, log, cluster: cluster.node };
      await reconcile(ctx);
      const release = new IdleRelease({ quietMs: IDLE_RELEASE_QUIET_MS, gc: v8Gc(), trim: mallocTrim, log });
      closers.push(() => release.close());
      const scheduler = new Scheduler(config.maxParallel, release);
      const metrics = new CniMetrics();
      const dispatcher = new CniDispatcher(ctx, scheduler, metrics);
      if (config.metricsAddress) {
        const server = new MetricsServer(
          [metrics.requests, metrics.duration],
          agentGauges(ctx, scheduler),
          log,
        );
        await server.listen(config.metricsAddress);
        closers.push(() => server.close());
      }
      const control = new ControlServer(
        controlSocketPath(config.socket),
        controlMethods(ctx, scheduler, new Date()),
        log,
      );
      await control.listen();
      closers.push(() => control.close());
      const server = new CniServer(config.socket, (req) => dispatcher.handle(req.env, req.stdin), log);
      await server.listen();
      log.info('agent started', {
        socket: config.socket,
        datapath: datapath.kind,
        podCIDRs: config.podCIDRs,
      });
      return new Agent(ctx, scheduler, server, closers);
    } catch (err) {
      await runClosers(closers, log);
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
    await runClosers(this.#closers, this.ctx.log);
    this.ctx.log.info('agent stopped');
  }

  /** Stops at once: calls in progress are cut (their relays answer "try again later"). */
  async destroy(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#server.destroy();
    await runClosers(this.#closers, this.ctx.log);
  }
}

async function runClosers(closers: Array<() => unknown>, log: Logger): Promise<void> {
  while (closers.length > 0) {
    const close = closers.pop();
    try {
      await close?.();
    } catch (err) {
      log.error('close failed', { err: String(err) });
    }
  }
}
