/** Naming of the host end of a pod's veth. */
import { createHash } from 'node:crypto';
import { attachmentKey as ipamAttachmentKey } from '../../ipam/store.js';

/** Every host veth podwire creates starts with this; reconcile and GC only ever touch such links. */
export const HOST_VETH_PREFIX = 'pw';

/**
 * The interface group (IFLA_GROUP) of every host veth podwire creates ("pw" in ASCII, 0x70 0x77): the
 * key of the host-veth input guard (`meta iifgroup`, startup/host-veth-input.ts). Set by the request
 * that creates the veth, so it is never up outside the group; another veth named `pw...` (an
 * administrator's) stays in group 0 and out of the guard.
 */
export const HOST_VETH_GROUP = 0x7077;

/**
 * A stable name of at most 15 bytes (IFNAMSIZ - 1) for the attachment (containerID, ifname): the same
 * attachment always gets the same name, so DEL finds it without any state.
 */
export function hostVethName(containerId: string, ifname: string): string {
  const digest = createHash('sha256').update(`${containerId}\0${ifname}`).digest('hex');
  return `${HOST_VETH_PREFIX}${digest.slice(0, 13)}`;
}

/** What the host veth's alias (IFLA_IFALIAS) starts with; the CNI network name follows. */
export const HOST_VETH_ALIAS_PREFIX = 'podwire network ';

/** IFALIASZ is 256 with the NUL; a longer name is not written (its veth then carries no name). */
const MAX_ALIAS_BYTES = 255;

/**
 * The alias ADD gives the host veth, naming the attachment's CNI network (`ip link` shows it), so that
 * GC of a network can tell its own veths from others' even when no claim explains them (an
 * interrupted DEL). Undefined when the name does not fit.
 */
export function hostVethAlias(network: string): string | undefined {
  const alias = `${HOST_VETH_ALIAS_PREFIX}${network}`;
  return Buffer.byteLength(alias) <= MAX_ALIAS_BYTES ? alias : undefined;
}

/** The network a host veth's alias names; undefined for no alias or one podwire did not write. */
export function networkOfAlias(alias: string | undefined): string | undefined {
  if (alias === undefined || !alias.startsWith(HOST_VETH_ALIAS_PREFIX)) return undefined;
  const network = alias.slice(HOST_VETH_ALIAS_PREFIX.length);
  return network === '' ? undefined : network;
}

/**
 * The key of one attachment: the scheduler serializes calls on it, the announcer and IPAM use the
 * same one (one format, `ipam/store.ts`, so one attachment is never two keys). The network name is
 * not part of it: CNI_IFNAME is unique within a pod's namespace, so on one node (containerID, ifname)
 * names at most one live attachment of any network (a second network's ADD of the same pair finds
 * the interface taken); the name is recorded with the claims instead, for GC.
 */
export function attachmentKey(containerId: string, ifname: string): string {
  return ipamAttachmentKey({ containerId, ifname });
}

/** The host veth of the attachment behind a key made by `attachmentKey`. */
export function hostVethOfKey(key: string): string {
  const [containerId, ifname] = JSON.parse(key) as [string, string];
  return hostVethName(containerId, ifname);
}
