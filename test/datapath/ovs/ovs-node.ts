/** Reading a test node's OVS for assertions: flows by cookie, pod ports, the pod's flow counters. */

import type { TestNode } from '../../../bed/node.js';
import type { OvsInstance } from '../../../bed/ovs.js';
import { type FlowEntry, flowKey, parseDump, parseFlow } from '../../../src/datapath/ovs/flow-text.js';
import { cookieText, isPodCookie, podCookie, TABLE } from '../../../src/datapath/ovs/pipeline.js';

interface AddOutcome {
  json?: Record<string, unknown> | undefined;
}

function interfacesOf(add: AddOutcome): Array<{ name: string; mac: string; sandbox?: string }> {
  return (add.json?.interfaces ?? []) as Array<{ name: string; mac: string; sandbox?: string }>;
}

/** The host veth an ADD result names (its first interface). */
export function hostVethOf(add: AddOutcome): string {
  const name = interfacesOf(add)[0]?.name;
  if (!name) throw new Error(`ADD result without interfaces: ${JSON.stringify(add.json)}`);
  return name;
}

/** The pod-side MAC an ADD result reports. */
export function podMacOf(add: AddOutcome): string {
  const mac = interfacesOf(add).find((i) => i.sandbox)?.mac;
  if (!mac) throw new Error(`ADD result without a pod interface: ${JSON.stringify(add.json)}`);
  return mac;
}

export function ovsOf(node: TestNode): OvsInstance {
  if (!node.ovs) throw new Error('node has no OVS');
  return node.ovs;
}

export async function dumpFlows(node: TestNode, match?: string): Promise<FlowEntry[]> {
  const args = match ? [match] : [];
  return parseDump(await ovsOf(node).ofctl('dump-flows', node.options.bridge, ...args));
}

/** The flows of one pod (by its host veth), read by cookie. */
export function podFlowsOf(node: TestNode, hostVeth: string): Promise<FlowEntry[]> {
  return dumpFlows(node, `cookie=${cookieText(podCookie(hostVeth))}/-1`);
}

/** Every flow that belongs to some pod. */
export async function allPodFlows(node: TestNode): Promise<FlowEntry[]> {
  return (await dumpFlows(node)).filter((f) => isPodCookie(f.cookie));
}

/** The OVS port names of the bridge (the bridge's own local port left out). */
export async function ovsPorts(node: TestNode): Promise<string[]> {
  const out = await ovsOf(node).vsctl('list-ports', node.options.bridge);
  return out.split('\n').filter((l) => l !== '');
}

/** n_packets of the default (priority 0) flow of `table`: what that table dropped. */
export async function dropped(node: TestNode, table: number): Promise<number> {
  const flows = await dumpFlows(node, `table=${table}`);
  return flows.find((f) => f.priority === 0)?.packets ?? 0;
}

/** Age (s) and packet count of each flow of a pod, by flow key: a re-added flow starts again at 0. */
export async function flowAges(
  node: TestNode,
  hostVeth: string,
): Promise<Map<string, { age: number; packets: number }>> {
  const out = await ovsOf(node).ofctl(
    'dump-flows',
    node.options.bridge,
    `cookie=${cookieText(podCookie(hostVeth))}/-1`,
  );
  const ages = new Map<string, { age: number; packets: number }>();
  for (const line of out.split('\n').filter((l) => l.includes('actions='))) {
    const age = Number(/duration=([\d.]+)s/.exec(line)?.[1]);
    ages.set(flowKey(parseFlow(line)), { age, packets: parseFlow(line).packets ?? 0 });
  }
  return ages;
}

/** The dump without statistics, sorted: equal before and after when nothing was changed. */
export async function flowTable(node: TestNode): Promise<string[]> {
  const out = await ovsOf(node).ofctl('dump-flows', node.options.bridge, '--no-stats');
  return out
    .split('\n')
    .filter((l) => l.includes('actions='))
    .map((l) => l.trim())
    .sort();
}

/**
 * Polls `read` until it returns at least `want` or 3 s pass; returns the last value. The userspace
 * datapath credits packets that hit its flow cache to the OpenFlow flows only when a revalidator
 * runs (about every 500 ms), so a counter lags the traffic it counts.
 */
export async function counterReaches(read: () => Promise<number>, want: number): Promise<number> {
  const deadline = Date.now() + 3000;
  for (;;) {
    const n = await read();
    if (n >= want || Date.now() > deadline) return n;
    await new Promise((res) => setTimeout(res, 100));
  }
}

export { TABLE };
