/**
 * The node agent's lifecycle. `Agent.start` opens its resources in order and, if any step fails,
 * closes the ones already open before rethrowing; `stop` drains, `destroy` stops at once. Both are
 * idempotent.
 */
import { join } from 'node:path';
import { Announcer } from '../arp/announcer.js';
import type { GatewayAddress } from '../datapath/datapath.js';
import { BridgeDatapath } from '../datapath/linux-bridge/bridge-datapath.js';
import { NodeLocalAllocator } from '../ipam/allocator.js';
import { parseCidr } from '../ipam/cidr.js';
import { FileStore } from '../ipam/file-store.js';
import { formatIp } from '../ipam/ip.js';
import { Rtnetlink } from '../kernel/netlink/rtnetlink.js';
import { NetnsHandle } from '../kernel/netns.js';
import { writeSysctl } from '../kernel/sysctl.js';
import { CniDispatcher } from './cni-dispatch.js';
import { CniServer } from './cni-server.js';
import type { AgentConfig } from './config.js';
import type { AgentContext } from './context.js';
import type { Logger } from './log.js';
import { reconcile } from './reconcile.js';
import { Scheduler } from './scheduler.js';

/** Three gratuitous ARPs, 50 ms apart (the contract; arping -U sends the same). */
export const ANNOUNCE = { rounds: 3, intervalMs: 50 } as const;

export function gatewaysOf(podCIDRs: string[]): GatewayAddress[] {
  return podCIDRs.map((text) => {
    const c = parseCidr(text);
    return { family: c.family, address: formatIp(c.family, c.gateway), prefixLength: c.prefixLength };
  });
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

  static async start(config: AgentConfig, log: Logger): Promise<Agent> {
    /** Undo steps for what is open so far, run in reverse order on failure or stop. */
    const closers: Array<() => unknown> = [];
    try {
      const home = NetnsHandle.current();
      closers.push(() => home.close());
      const nl = Rtnetlink.open({ async: true });
      closers.push(() => nl.close());
      const store = await FileStore.open(join(config.stateDir, 'ipam'));
      closers.push(() => store.close());
      const ipam = await NodeLocalAllocator.open(config.podCIDRs, store);
      const datapath = new BridgeDatapath({
        nl,
        bridge: config.bridge,
        mtu: config.mtu,
        gateways: gatewaysOf(config.podCIDRs),
        sysctl: writeSysctl,
      });
      await datapath.start();
      closers.push(() => datapath.stop());
      const announcer = new Announcer(ANNOUNCE, (key, err) =>
        log.warn('announcement round failed', { attachment: key, err: String(err) }),
      );
      closers.push(() => announcer.cancelAll());
      const ctx: AgentContext = { config, home, nl, ipam, datapath, announcer, log };
      await reconcile(ctx);
      const scheduler = new Scheduler(config.maxParallel);
      const dispatcher = new CniDispatcher(ctx, scheduler);
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
