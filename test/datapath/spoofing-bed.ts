/**
 * What the spoofing suite's files share (spoofing.ts, spoofing-nd.ts): the pods, the node, the scapy
 * sender of the attacker, and the probes that read the victims' state.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { ipJson, must, run } from '../../bed/exec.js';
import type { TestNode } from '../../bed/node.js';
import type { ScapySender } from './ovs/scapy-sender.js';

export const BCAST = 'ff:ff:ff:ff:ff:ff';
export const ALL_NODES_MAC = '33:33:00:00:00:01';
export const FOREIGN_MAC = '02:de:ad:be:ef:02';
export interface Pod {
  ns: string;
  mac: string;
  v4: string;
  v6: string;
  ll: string;
}

/** `ip neigh show to IP dev DEV` in `ns`: the entry's MAC, lower case; undefined without an entry. */
export async function neighMac(ns: string, ip: string, dev: string): Promise<string | undefined> {
  const entries = await ipJson<Array<{ lladdr?: string }>>(ns, ['neigh', 'show', 'to', ip, 'dev', dev]);
  return entries[0]?.lladdr?.toLowerCase();
}

/**
 * One counter of /proc/net/snmp (e.g. Icmp InEchos) or /proc/net/snmp6 (e.g. Icmp6InEchos) in `ns`;
 * with `dev`, the IPv6 counter of that interface only (/proc/net/dev_snmp6/DEV).
 */
export async function snmp(ns: string, key: string, dev?: string): Promise<number> {
  if (key.startsWith('Icmp6') || key.startsWith('Ip6')) {
    const file = dev ? `/proc/net/dev_snmp6/${dev}` : '/proc/net/snmp6';
    const text = await must('ip', ['netns', 'exec', ns, 'cat', file]);
    const line = text.split('\n').find((l) => l.split(/\s+/)[0] === key);
    return Number(line?.split(/\s+/)[1] ?? 0);
  }
  const [group, name] = key.split(' ') as [string, string];
  const lines = (await must('ip', ['netns', 'exec', ns, 'cat', '/proc/net/snmp'])).split('\n');
  const header = lines.findIndex((l) => l.startsWith(`${group}:`));
  const names = lines[header]?.split(/\s+/) ?? [];
  const values = lines[header + 1]?.split(/\s+/) ?? [];
  return Number(values[names.indexOf(name)] ?? 0);
}

/** Polls `probe` until it returns true or `ms` pass; returns its last answer. */
export async function eventually(probe: () => Promise<boolean>, ms = 3000): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await probe()) return true;
    if (Date.now() > deadline) return false;
    await sleep(100);
  }
}

export async function ping(ns: string, ip: string): Promise<void> {
  const args = ['netns', 'exec', ns, 'ping', '-c', '1', '-W', '2', ip];
  if (ip.includes(':')) args.splice(4, 0, '-6');
  const r = await run('ip', args);
  assert.equal(r.code, 0, `ping ${ip} from ${ns}: ${r.stdout}${r.stderr}`);
}

/** One run of the suite on one datapath: filled in by its `before`, read by the tests when they run. */
export interface SpoofingBed {
  node: TestNode;
  /** The node's interface holding the gateway addresses, and its MAC. */
  gwIf: string;
  gwMac: string;
  GW6: string;
  attacker: Pod;
  neighbour: Pod;
  third: Pod;
  /** Sends the attacker's forged frames. */
  scapy: ScapySender;
  /** The drops a guard has counted so far (the agent's metric). */
  drops(guard: string): Promise<number>;
  /** The guard counted at least `n` more drops than `before` (OVS credits its counters late). */
  counted(guard: string, before: number, n: number): Promise<void>;
}
