/**
 * CNI CHECK: compares what exists with what ADD reported (`prevResult`), with the IPAM record and with
 * the network's routes (pod-routes.ts); any difference is an ERR_CHECK_FAILED that names it. A CHECK
 * that passes on a legacy claim (one recorded before podwire kept the network name) records the
 * network's name in it (store.ts, `AllocationRecord.network`).
 */
import { CheckFailedError, type PodwireError } from '../../base/errors.js';
import type { Attachment, CniResult } from '../../cni/types.js';
import { checkPodBandwidth, type PodBandwidth, planBandwidth } from '../../datapath/pod-bandwidth.js';
import { AF_INET, AF_INET6 } from '../../kernel/libc.js';
import { Rtnetlink } from '../../kernel/netlink/rtnetlink.js';
import { inNetns, openPodNetns } from '../../kernel/netns.js';
import type { AgentContext } from '../context.js';
import type { Logger } from '../log.js';
import { hostVethName } from './host-veth.js';
import { defaultDst, podRoutes, type RouteConf } from './pod-routes.js';

function drift(msg: string): PodwireError {
  return new CheckFailedError(msg);
}

/** The network a CHECK is for: its name, its routes and the pod's bandwidth limits. */
export interface CheckNetwork {
  name: string;
  routeConf: RouteConf;
  bandwidth?: PodBandwidth | undefined;
}

export async function cmdCheck(
  ctx: AgentContext,
  att: Attachment,
  netnsPath: string,
  prev: CniResult,
  network: CheckNetwork,
  log: Logger,
): Promise<void> {
  const hostName = hostVethName(att.containerId, att.ifname);
  const podIface = prev.interfaces.findIndex((i) => i.name === att.ifname && i.sandbox !== undefined);
  if (podIface < 0) throw drift(`prevResult: no interface ${att.ifname} with a sandbox`);
  const expected = prev.interfaces[podIface];

  const held = ctx.ipam.owned(att);
  const other = held.find((a) => a.network !== undefined && a.network !== network.name);
  if (other) {
    throw drift(`${other.ip} is held by this attachment in network ${other.network}, not ${network.name}`);
  }
  const heldText = new Set(held.map((a) => `${a.ip}/${a.prefixLength}`));
  const prevIps = prev.ips.filter((ip) => ip.interface === undefined || ip.interface === podIface);
  for (const ip of prevIps) {
    if (!heldText.has(ip.address)) throw drift(`IPAM holds no record of ${ip.address} for this attachment`);
  }

  using podNs = await openPodNetns(netnsPath, ctx.home);
  using podNl = inNetns(podNs, ctx.home, () => Rtnetlink.open());
  const link = podNl.linkByName(att.ifname);
  if (!link) throw drift(`interface ${att.ifname} does not exist in ${netnsPath}`);
  if (link.kind !== 'veth')
    throw drift(`interface ${att.ifname} is a ${link.kind ?? 'non-veth'} link, not veth`);
  if (expected?.mac && link.mac?.toLowerCase() !== expected.mac.toLowerCase()) {
    throw drift(`interface ${att.ifname} has MAC ${link.mac}, prevResult says ${expected.mac}`);
  }
  if (!link.up) throw drift(`interface ${att.ifname} is down`);
  const present = new Set(
    podNl.addresses({ index: link.index }).map((a) => `${a.address}/${a.prefixLength}`),
  );
  for (const ip of prevIps) {
    if (!present.has(ip.address)) throw drift(`address ${ip.address} is missing on ${att.ifname}`);
  }
  const present4 = podNl.routes({ family: AF_INET, oif: link.index });
  const present6 = held.some((a) => a.family === 6)
    ? podNl.routes({ family: AF_INET6, oif: link.index })
    : [];
  for (const want of podRoutes(network.routeConf, held)) {
    const v6 = want.dst.includes(':');
    const dst = want.dst === defaultDst(v6 ? 6 : 4) ? undefined : want.dst;
    const found = (v6 ? present6 : present4).some((r) => r.dst === dst && r.gateway === want.gw);
    if (!found) {
      const what = dst === undefined ? `default IPv${v6 ? 6 : 4} route` : `route ${want.dst}`;
      throw drift(`${what} via ${want.gw} is missing on ${att.ifname}`);
    }
  }
  await ctx.datapath.checkPort(hostName);
  // The limits the runtime passes again (the `bandwidth` capability) are the ones in place.
  const hostLink = ctx.nl.linkByName(hostName);
  if (!hostLink) throw drift(`host veth ${hostName} does not exist`);
  checkPodBandwidth(ctx.nl, hostName, hostLink.index, planBandwidth(network.bandwidth, ctx.config.mtu));
  const adopted = await ctx.ipam.adoptNetwork(att, network.name);
  if (adopted > 0)
    log.info('legacy claims adopted the network name', { network: network.name, claims: adopted });
}
