/**
 * CNI CHECK: compares what exists with what ADD reported (`prevResult`) and with the IPAM record;
 * any difference is an ERR_CHECK_FAILED that names it.
 */
import { CheckFailedError, type PodwireError } from '../../base/errors.js';
import type { Attachment, CniResult } from '../../cni/types.js';
import { AF_INET, AF_INET6 } from '../../kernel/libc.js';
import { Rtnetlink } from '../../kernel/netlink/rtnetlink.js';
import { inNetns, openPodNetns } from '../../kernel/netns.js';
import type { AgentContext } from '../context.js';
import { hostVethName } from './host-veth.js';

function drift(msg: string): PodwireError {
  return new CheckFailedError(msg);
}

function defaultDst(family: number): string {
  return family === 4 ? '0.0.0.0/0' : '::/0';
}

export async function cmdCheck(
  ctx: AgentContext,
  att: Attachment,
  netnsPath: string,
  prev: CniResult,
): Promise<void> {
  const hostName = hostVethName(att.containerId, att.ifname);
  const podIface = prev.interfaces.findIndex((i) => i.name === att.ifname && i.sandbox !== undefined);
  if (podIface < 0) throw drift(`prevResult: no interface ${att.ifname} with a sandbox`);
  const expected = prev.interfaces[podIface];

  const held = ctx.ipam.lookup(att);
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
  for (const a of held) {
    const routes = podNl.routes({ family: a.family === 4 ? AF_INET : AF_INET6, oif: link.index });
    const def = routes.find((r) => r.dst === undefined || r.dst === defaultDst(a.family));
    if (!def || def.gateway !== a.gateway) {
      throw drift(`default IPv${a.family} route via ${a.gateway} is missing on ${att.ifname}`);
    }
  }
  await ctx.datapath.checkPort(hostName);
}
