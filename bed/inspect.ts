/** Reading the state of namespaces with `ip -j`, for assertions. */
import { ipJson } from './exec.js';

interface IpAddr {
  ifname: string;
  addr_info: Array<{ local: string; prefixlen: number; scope: string }>;
}

/** Global addresses per interface of a namespace, as "ip/len". */
export async function addressesByInterface(ns: string): Promise<Map<string, string[]>> {
  const links = await ipJson<IpAddr[]>(ns, ['addr', 'show']);
  return new Map(
    links.map((l) => [
      l.ifname,
      l.addr_info.filter((a) => a.scope === 'global').map((a) => `${a.local}/${a.prefixlen}`),
    ]),
  );
}

/** Names of the links in a namespace. */
export async function linkNames(ns: string): Promise<string[]> {
  const links = await ipJson<Array<{ ifname: string }>>(ns, ['link', 'show']);
  return links.map((l) => l.ifname);
}

/** Host veths podwire created in the node namespace. */
export async function hostVeths(nodeNs: string): Promise<string[]> {
  return (await linkNames(nodeNs)).filter((n) => n.startsWith('pw'));
}

/**
 * Host veths once the agent's deletions have settled: DEL answers before the kernel has finished
 * unregistering the veth (~20 ms), so a check right after DEL waits until `count` remain (or 3 s).
 */
export async function settledHostVeths(nodeNs: string, count: number, timeoutMs = 3000): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const veths = await hostVeths(nodeNs);
    if (veths.length === count || Date.now() > deadline) return veths;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
