/**
 * What an agent does with the store at start, as helpers over the `ClusterStore` seam:
 * publish its own node record (a compare-and-swap loop), and remove a node for good.
 */
import { nodesEqual, parseNodeRecord } from './node-record.js';
import { type ClusterStore, type NodeRecord, type OpOptions, type StoredNode, storeError } from './store.js';

/** Enough for every agent of a cluster updating one record at once; more means a livelock. */
const MAX_ATTEMPTS = 20;

/**
 * Makes the store's record for `desired.name` carry every field `desired` sets (fields it leaves
 * undefined keep their stored value). Writes nothing when the store already agrees, so it also
 * works with a read-only store (the file store) as long as the file says what the agent would
 * publish; when it does not, the store's read-only error names the file.
 */
export async function registerNode(
  store: ClusterStore,
  desired: NodeRecord,
  opts: OpOptions = {},
): Promise<StoredNode> {
  const wanted = parseNodeRecord(desired, `registerNode ${desired?.name}`, { strictKeys: true });
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const current = await store.getNode(wanted.name, opts);
    const merged: NodeRecord = current === undefined ? wanted : mergeRecord(current.node, wanted);
    if (current !== undefined && nodesEqual(current.node, merged)) return current;
    const res = await store.putNode(
      merged,
      current === undefined ? 'absent' : { version: current.version },
      opts,
    );
    if (res.ok) return { node: merged, version: res.version };
  }
  throw storeError(
    `${store.description}: registerNode ${wanted.name}: gave up after ${MAX_ATTEMPTS} conflicts`,
  );
}

function mergeRecord(current: NodeRecord, wanted: NodeRecord): NodeRecord {
  const out: NodeRecord = { ...current, underlayIP: wanted.underlayIP, podCIDRs: wanted.podCIDRs };
  if (wanted.vtepMac !== undefined) out.vtepMac = wanted.vtepMac;
  if (wanted.uplinkMac !== undefined) out.uplinkMac = wanted.uplinkMac;
  if (wanted.labels !== undefined) out.labels = wanted.labels;
  return out;
}

/**
 * `podwire node remove NAME`: deletes the node record, then frees its pod CIDRs; peers' watches see
 * the delete and tear down their routes and tunnels to it. Returns the CIDRs freed.
 */
export async function removeNode(store: ClusterStore, name: string, opts: OpOptions = {}): Promise<string[]> {
  await store.deleteNode(name, opts);
  return store.releasePodCIDRs(name, opts);
}
