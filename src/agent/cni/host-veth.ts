/** Naming of the host end of a pod's veth. */
import { createHash } from 'node:crypto';
import { attachmentKey as ipamAttachmentKey } from '../../ipam/store.js';

/** Every host veth podwire creates starts with this; reconcile and GC only ever touch such links. */
export const HOST_VETH_PREFIX = 'pw';

/**
 * A stable name of at most 15 bytes (IFNAMSIZ - 1) for the attachment (containerID, ifname): the same
 * attachment always gets the same name, so DEL finds it without any state.
 */
export function hostVethName(containerId: string, ifname: string): string {
  const digest = createHash('sha256').update(`${containerId}\0${ifname}`).digest('hex');
  return `${HOST_VETH_PREFIX}${digest.slice(0, 13)}`;
}

/**
 * The key of one attachment: the scheduler serializes calls on it, the announcer and IPAM use the
 * same one (one format, `ipam/store.ts`, so one attachment is never two keys).
 */
export function attachmentKey(containerId: string, ifname: string): string {
  return ipamAttachmentKey({ containerId, ifname });
}

/** The host veth of the attachment behind a key made by `attachmentKey`. */
export function hostVethOfKey(key: string): string {
  const [containerId, ifname] = JSON.parse(key) as [string, string];
  return hostVethName(containerId, ifname);
}
