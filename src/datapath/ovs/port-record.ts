/**
 * What podwire records in the `external_ids` of a pod's Port and Interface rows: enough to rebuild
 * the pod's flows from OVSDB alone after a restart (OVSDB is the record of what is attached), and
 * to find a pod's port by container ID or by Kubernetes name.
 */
import { DatapathError } from '../../base/errors.js';
import type { Prefix } from '../../base/ip.js';
import { onUnderlay } from '../pod-cidrs.js';

export const EXT_ROLE = 'podwire-role';
export const EXT_CONTAINER_ID = 'podwire-container-id';
export const EXT_IFNAME = 'podwire-ifname';
/** The Kubernetes pod, "namespace/name". */
export const EXT_POD = 'podwire-pod';
export const EXT_MAC = 'podwire-mac';
/** The pod's addresses, comma-separated, without prefix length. */
export const EXT_IPS = 'podwire-ips';
/** The VLAN of the pod's pool (1-4094); absent for an untagged pod. */
export const EXT_VLAN = 'podwire-vlan';
/**
 * "true" for a pool pod (pod-cidrs.ts), as ADD found it: in bridging mode its frames share the
 * underlay's L2 (decision 30). "false" for a plain pod; absent in records older than that.
 */
export const EXT_UNDERLAY = 'podwire-underlay';

export const ROLE_POD = 'pod';
export const ROLE_GATEWAY = 'gateway';
/** The node's uplink, a port of the bridge in bridging mode. */
export const ROLE_UPLINK = 'uplink';

/** The identity and addresses of one pod attachment, as recorded on its port. */
export interface PodRecord {
  containerId: string;
  ifname: string;
  mac: string;
  ips: string[];
  /** The Kubernetes pod as "namespace/name" (from CNI_ARGS), when the runtime sent it. */
  pod?: string;
  /** The VLAN of the pod's pool; absent or 0: untagged. */
  vlan?: number;
  /** A pool pod, as ADD found it; undefined in an older record (then its addresses tell). */
  underlay?: boolean;
}

export function podExternalIds(r: PodRecord): Record<string, string> {
  const ids: Record<string, string> = {
    [EXT_ROLE]: ROLE_POD,
    [EXT_CONTAINER_ID]: r.containerId,
    [EXT_IFNAME]: r.ifname,
    [EXT_MAC]: r.mac.toLowerCase(),
    [EXT_IPS]: r.ips.join(','),
  };
  if (r.pod) ids[EXT_POD] = r.pod;
  if (r.vlan) ids[EXT_VLAN] = String(r.vlan);
  if (r.underlay !== undefined) ids[EXT_UNDERLAY] = String(r.underlay);
  return ids;
}

/** The record of a pod port; undefined for any port podwire did not create for a pod. */
export function parsePodExternalIds(ids: Record<string, string>): PodRecord | undefined {
  if (ids[EXT_ROLE] !== ROLE_POD) return undefined;
  // An IPv6-only or IPv4-only pod has addresses of one family; no addresses at all is recorded as ''.
  const missing = [EXT_CONTAINER_ID, EXT_IFNAME, EXT_MAC, EXT_IPS].filter(
    (k) => ids[k] === undefined || (k !== EXT_IPS && ids[k] === ''),
  );
  if (missing.length > 0) {
    throw new DatapathError(`OVSDB: a podwire pod port lacks ${missing.join(', ')}`);
  }
  const containerId = ids[EXT_CONTAINER_ID] as string;
  const ifname = ids[EXT_IFNAME] as string;
  const mac = ids[EXT_MAC] as string;
  const ips = ids[EXT_IPS] as string;
  const rec: PodRecord = { containerId, ifname, mac, ips: ips === '' ? [] : ips.split(',') };
  const pod = ids[EXT_POD];
  if (pod) rec.pod = pod;
  const vlan = ids[EXT_VLAN];
  if (vlan !== undefined) {
    const n = Number(vlan);
    if (!Number.isInteger(n) || n < 1 || n > 4094)
      throw new DatapathError(`OVSDB: pod port has ${EXT_VLAN}=${vlan}, not a VLAN`);
    rec.vlan = n;
  }
  const underlay = ids[EXT_UNDERLAY];
  if (underlay !== undefined) {
    if (underlay !== 'true' && underlay !== 'false')
      throw new DatapathError(`OVSDB: pod port has ${EXT_UNDERLAY}=${underlay}, not true or false`);
    rec.underlay = underlay === 'true';
  }
  return rec;
}

/** Whether the recorded pod is a pool pod: as ADD recorded it, else (an older record) by its addresses. */
export function recordOnUnderlay(r: PodRecord, cidrs: readonly Prefix[]): boolean {
  return r.underlay ?? onUnderlay(r.ips, cidrs);
}

/** True when `query` names this pod: its container ID, or NAMESPACE/NAME. */
export function podMatches(r: PodRecord, query: string): boolean {
  if (r.containerId === query) return true;
  return r.pod === query;
}
