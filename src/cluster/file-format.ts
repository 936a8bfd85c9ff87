/**
 * The static cluster file: YAML (JSON is YAML too), one mapping with one key.
 *
 *   # /etc/podwire/cluster.yaml
 *   nodes:
 *     - name: node-1
 *       underlayIP: 192.168.50.11
 *       podCIDRs: [10.244.1.0/24, fd00:10:244:1::/64]
 *       vtepMac: 0a:58:c0:a8:32:0b     # optional
 *       labels: {zone: a}              # optional
 *
 * Unknown keys are refused (a typo must not silently drop a field); node names are unique; no two
 * nodes' pod CIDRs overlap. Every error names the file and the key, e.g.
 * "cluster file /etc/podwire/cluster.yaml: nodes[1].podCIDRs[0]: ...".
 */
import { parse as parseYaml } from 'yaml';
import { isPrefix, parsePrefix, prefixesOverlap } from '../base/ip.js';
import { parseNodeRecord } from './node-record.js';
import { type NodeRecord, storeError } from './store.js';

export function parseClusterFile(text: string, path: string): NodeRecord[] {
  const where = `cluster file ${path}`;
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw storeError(`${where}: not valid YAML: ${err instanceof Error ? err.message : String(err)}`, err);
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw storeError(`${where}: (top level) must be a mapping with a "nodes" list`);
  }
  const top = raw as Record<string, unknown>;
  for (const key of Object.keys(top)) {
    if (key !== 'nodes') throw storeError(`${where}: ${key}: unknown key`);
  }
  if (!Array.isArray(top.nodes)) throw storeError(`${where}: nodes: must be a list`);

  const nodes: NodeRecord[] = [];
  const owners: { cidr: string; index: number; name: string }[] = [];
  for (const [i, value] of (top.nodes as unknown[]).entries()) {
    const node = parseNodeRecord(value, `${where}: nodes[${i}]`, { strictKeys: true });
    const dup = nodes.findIndex((n) => n.name === node.name);
    if (dup >= 0) throw storeError(`${where}: nodes[${i}].name: ${node.name} is also nodes[${dup}]`);
    for (const [j, cidr] of node.podCIDRs.entries()) {
      const mine = parsePrefix(cidr);
      for (const other of owners) {
        const theirs = parsePrefix(other.cidr);
        if (isPrefix(mine) && isPrefix(theirs) && prefixesOverlap(mine, theirs)) {
          throw storeError(
            `${where}: nodes[${i}].podCIDRs[${j}]: ${cidr} overlaps ${other.cidr} of nodes[${other.index}] (${other.name})`,
          );
        }
      }
    }
    for (const cidr of node.podCIDRs) owners.push({ cidr, index: i, name: node.name });
    nodes.push(node);
  }
  return nodes;
}
