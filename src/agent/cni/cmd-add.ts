/**
 * CNI ADD, in the order it happens (docs/architecture.md, "A CNI ADD, end to end"). Each step that changes
 * something pushes its undo; any failure rolls back what was done, in reverse order.
 */
import { setImmediate } from 'node:timers/promises';
import {
  AlreadyAllocatedError,
  InterfaceExistsError,
  InvalidConfigError,
  NotAvailableError,
} from '../../base/errors.js';
import { podMac } from '../../base/pod-mac.js';
import type { Attachment, CniResult, CniRoute } from '../../cni/types.js';
import type { PodPort } from '../../datapath/datapath.js';
import {
  createPodIfb,
  type PodBandwidth,
  planBandwidth,
  removePodIfb,
  shapeIngress,
} from '../../datapath/pod-bandwidth.js';
import type { Allocation } from '../../ipam/allocator.js';
import type { PoolRequest } from '../../ipam/pool-allocator.js';
import { EthtoolSocket } from '../../kernel/ethtool.js';
import { KernelError } from '../../kernel/libc.js';
import { Rtnetlink } from '../../kernel/netlink/rtnetlink.js';
import { inNetns, openPodNetns } from '../../kernel/netns.js';
import type { AgentContext } from '../context.js';
import type { Logger } from '../log.js';
import { UndoStack } from '../undo-stack.js';
import { attachmentKey, HOST_VETH_GROUP, hostVethAlias, hostVethName } from './host-veth.js';
import { hostVethTakesNothing } from './host-veth-sysctls.js';
import { podAttached, podDetached } from './local-pods.js';
import { configurePodInterface, waitCanTransmit } from './pod-interface.js';
import { podRoutes, type RouteConf } from './pod-routes.js';
import { podIgnoresRouterAdvertisements } from './pod-sysctls.js';
import { StepTimer } from './step-timer.js';

const EEXIST = 17;

/** The attachment ADD works on, with the pod it is for when the runtime said ("namespace/name"). */
export interface AddTarget extends Attachment {
  pod: string | undefined;
  /** CNI_ARGS K8S_POD_UID, when the runtime sent it (the pod cache tells a re-created namesake by it). */
  podUid?: string | undefined;
  /** The IP pool the pod draws from; undefined: the node's pod CIDRs. */
  pool?: PoolRequest | undefined;
  /** The CNI network name (the configuration's `name`): recorded with the claims and on the host veth. */
  network: string;
  /** The network's routes (`defaultRoute`, `routes`). */
  routeConf: RouteConf;
  /** The `bandwidth` capability's limits (cni/bandwidth.ts); undefined: not shaped. */
  bandwidth?: PodBandwidth | undefined;
}

export async function cmdAdd(
  ctx: AgentContext,
  att: AddTarget,
  netnsPath: string,
  log: Logger,
): Promise<CniResult> {
  // Before anything is touched: a node whose pod CIDRs the cluster store gives to another (or that
  // now holds others) must not hand out their addresses (decision 10).
  const leaseProblem = ctx.cluster?.leaseProblem;
  if (leaseProblem !== undefined) throw new NotAvailableError(`ADD refused: ${leaseProblem}`);
  const { nl, ipam, datapath, home } = ctx;
  // Every limit checked before anything is created (decision 42).
  const shaping = planBandwidth(att.bandwidth, ctx.config.mtu);
  if (shaping.egress && !datapath.podEgressShaping)
    throw new InvalidConfigError(
      `runtimeConfig.bandwidth.egressRate: the ${datapath.kind} datapath owns its ports' tc ingress, where an egress rate is shaped (decision 42); only ingressRate is possible`,
    );
  const undo = new UndoStack();
  const t = new StepTimer();
  const podNs = await openPodNetns(netnsPath, home);
  let handedOver = false;
  try {
    using podNl = inNetns(podNs, home, () => Rtnetlink.open());
    // The pod side of a veth whose DEL already answered may still be on its way out (decision 14):
    // a new attachment in the same namespace waits for deletions in flight before it calls it taken.
    if (podNl.linkByName(att.ifname)) await nl.deletionsSettled();
    if (podNl.linkByName(att.ifname)) {
      // This attachment ADDed already: say that (102 with its addresses, as IPAM says when the second
      // ADD names another namespace), not just that the name is taken, which hides why.
      const held = ipam.lookup(att).map((a) => a.ip);
      if (held.length > 0) {
        throw new AlreadyAllocatedError(
          `container ${att.containerId} interface ${att.ifname} already holds ${held.join(', ')} (its ${att.ifname} is in ${netnsPath}): ADD was called twice; DEL it first`,
        );
      }
      throw new InterfaceExistsError(`CNI_IFNAME: ${att.ifname} already exists in ${netnsPath}`);
    }

    t.mark('netns');

    const allocations = await ipam.allocate(att, {
      ...(att.pod === undefined ? {} : { pod: att.pod }),
      ...(att.pool === undefined ? {} : { pool: att.pool }),
      network: att.network,
    });
    undo.push('ipam', () => ipam.release(att));
    const routes = podRoutes(att.routeConf, allocations);
    t.mark('ipam');

    const hostName = hostVethName(att.containerId, att.ifname);
    const mac = podMac(allocations.map((a) => a.ip));
    const hostLink = createVeth(ctx, hostName, att.ifname, podNs.fd, mac);
    undo.push('veth', () => nl.deleteLinkByName(hostName));
    const port: PodPort = {
      hostIfname: hostName,
      hostIfindex: hostLink.index,
      containerId: att.containerId,
      ifname: att.ifname,
      podMac: mac,
      podIps: allocations.map((a) => a.ip),
      pod: att.pod,
      vlan: allocations.find((a) => a.vlan)?.vlan,
    };
    // Undo first: a port attach that fails halfway (an OVS row without its flows) is undone too.
    const undoAttach = () => undo.push('datapath', () => datapath.detachPort(hostName));
    if (datapath.openPort) {
      // A switch in another process (OVS) opens the port while the agent does the rest of the veth
      // and the pod side below; the host end stays down until attachPort.
      undoAttach();
      datapath.openPort(port);
      await setImmediate(); // its requests go out before the synchronous kernel calls below
    }
    // The network's name on the host veth: GC of a network judges a veth without a claim by it.
    const alias = hostVethAlias(att.network);
    if (alias !== undefined) nl.setLinkAlias(hostLink.index, alias);
    // Before it comes up: what the pod sends reaches the node only through the datapath.
    hostVethTakesNothing(hostName);
    // The pod's egress limit before its port comes up (pod-bandwidth.ts): its own IFB (the checksum
    // hop's target for this pod) with a TBF.
    if (shaping.egress) {
      createPodIfb(nl, hostName, ctx.config.mtu, shaping.egress);
      undo.push('pod IFB', () => removePodIfb(nl, hostName));
    }
    t.mark('veth');

    podIgnoresRouterAdvertisements(podNs, home, att.ifname);
    const pod = configurePodInterface(podNl, att.ifname, allocations, routes);
    if (!datapath.podTxChecksumming) {
      using ethtool = inNetns(podNs, home, () => EthtoolSocket.open());
      ethtool.setTxChecksumming(att.ifname, false);
    }
    t.mark('pod');
    // The pod in the pod cache's view now, whatever the API server has delivered (decision 47), and
    // its NetworkPolicy in force before its port forwards one frame (decision 49).
    podAttached(ctx, att, port.podIps);
    undo.push('pod cache', () => podDetached(ctx, att));
    await policyInForce(ctx, `${att.pod ?? att.containerId}`);
    t.mark('policy');
    if (!datapath.openPort) undoAttach();
    await datapath.attachPort(port);
    // The ingress limit, a TBF as the host veth's root qdisc, once the port is attached: ovs-vswitchd,
    // configuring a port without QoS, removes a root qdisc it finds there (seen: the TBF gone).
    if (shaping.ingress) shapeIngress(nl, hostLink.index, shaping.ingress);
    t.mark('datapath');
    await waitCanTransmit(podNl, att.ifname, pod.index);
    t.mark('carrier');

    // Only now will the datapath carry the announcement (I5). The announcer owns podNs from here on.
    handedOver = true;
    ctx.announcer.start(attachmentKey(att.containerId, att.ifname), {
      netns: podNs,
      home,
      ifindex: pod.index,
      mac: pod.mac,
      ...announced(allocations),
    });

    t.mark('announce');
    undo.commit();
    log.info('attachment added', { hostVeth: hostName, ips: allocations.map((a) => a.ip), steps: t.steps });
    return buildResult(
      hostName,
      hostLink.mac ?? '',
      att.ifname,
      pod.mac,
      netnsPath,
      allocations,
      routes,
      ctx.config.mtu,
    );
  } catch (err) {
    await undo.unwind(log);
    throw err;
  } finally {
    if (!handedOver) podNs.close();
  }
}

/**
 * Equivalent to: `ip link add HOST mtu M type veth peer name IFNAME netns POD`. A host veth of the same
 * name can only be left over from an agent killed mid-ADD of this very attachment (the name derives
 * from the attachment, and IPAM refused no second allocation), so it is removed and creation retried.
 */
function createVeth(ctx: AgentContext, hostName: string, ifname: string, podFd: number, mac: string) {
  // In the guard's group from its creation on (host-veth-input.ts).
  const spec = {
    name: hostName,
    peerName: ifname,
    mtu: ctx.config.mtu,
    peerNetnsFd: podFd,
    peerMac: mac,
    group: HOST_VETH_GROUP,
  };
  try {
    return ctx.nl.addVeth(spec);
  } catch (err) {
    if (!(err instanceof KernelError && err.errno === EEXIST)) throw err;
    if (!ctx.nl.linkByName(hostName)) throw err;
    ctx.log.warn('removing leftover host veth', { hostVeth: hostName });
    ctx.nl.deleteLinkByName(hostName);
    return ctx.nl.addVeth(spec);
  }
}

function announced(allocations: Allocation[]): { ipv4?: string; ipv6?: string } {
  const out: { ipv4?: string; ipv6?: string } = {};
  for (const a of allocations) {
    if (a.family === 4) out.ipv4 = a.ip;
    else out.ipv6 = a.ip;
  }
  return out;
}

/**
 * The result names the host veth (no sandbox) beside the pod's interface: plugins chained after
 * podwire find the pod's host side there (the reference `bandwidth` shapes traffic on it; decision 21).
 */
function buildResult(
  hostName: string,
  hostMac: string,
  ifname: string,
  podMac: string,
  sandbox: string,
  allocations: Allocation[],
  routes: CniRoute[],
  mtu: number,
): CniResult {
  return {
    interfaces: [
      { name: hostName, mac: hostMac, mtu },
      { name: ifname, mac: podMac, mtu, sandbox },
    ],
    ips: allocations.map((a) => ({ address: `${a.ip}/${a.prefixLength}`, gateway: a.gateway, interface: 1 })),
    routes,
    dns: {},
  };
}

/** The longest an ADD waits for the apply that brings its pod under NetworkPolicy. */
const POLICY_WAIT_MS = 20_000;

/** Resolves once the datapath enforces the pod's NetworkPolicy (or there is none to enforce on this node). */
async function policyInForce(ctx: AgentContext, pod: string): Promise<void> {
  const policy = ctx.policy;
  if (!policy) return;
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      policy.settled().catch((err: unknown) => {
        throw new NotAvailableError(
          `ADD refused: NetworkPolicy for ${pod} could not be put in force: ${err instanceof Error ? err.message : String(err)}`,
        );
      }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new NotAvailableError(
                `ADD refused: NetworkPolicy for ${pod} not in force within ${POLICY_WAIT_MS / 1000} s (policy apply: ${policy.lastError ?? 'still running'})`,
              ),
            ),
          POLICY_WAIT_MS,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
