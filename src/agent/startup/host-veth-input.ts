/**
 * No packet enters the node's own stack on a host veth. A pod's frames reach the node through the
 * bridge (its interface is the node's input device) or the OVS gateway port, never on the host veth
 * itself. Yet the kernel delivers some there:
 * - the Linux bridge passes frames for a link-local group address (01:80:c2:00:00:0x) up on the
 *   port they came in on, before the pod guards' prerouting hook;
 * - OVS's userspace datapath reads the veth through a packet socket, and the stack receives every
 *   frame too; broadcasts are taken.
 * Strict reverse-path filtering does not stop such a packet from 0.0.0.0 to a broadcast address, so
 * a pod could send the node's own sockets (a DHCP server on the host, say) datagrams from 0.0.0.0 that
 * no firewall rule keyed on the gateway interface sees.
 *
 * One rule in an inet-family input chain drops what arrives on a podwire host veth, counted. Podwire's
 * own are told by their interface group (`HOST_VETH_GROUP`, set by the request that creates the veth:
 * guarded from the instant it exists), not by their name: a veth an administrator names `pw...` is not
 * podwire's business. Installed at every start, before the datapath; host veths of an agent that did
 * not set the group (they carry podwire's alias) join it first. The table stays when the agent stops,
 * as the pod guards do. Needs `nft`: without it the agent warns and starts.
 */
import type { Rtnetlink } from '../../kernel/netlink/rtnetlink.js';
import type { Nft } from '../../kernel/nft.js';
import { HOST_VETH_ALIAS_PREFIX, HOST_VETH_GROUP, HOST_VETH_PREFIX } from '../cni/host-veth.js';

export const HOST_VETH_INPUT_TABLE = 'podwire_host_veth';

/** The script that (re)creates the table in one transaction. */
export function hostVethInputScript(): string {
  const T = `inet ${HOST_VETH_INPUT_TABLE}`;
  return [
    `table ${T} {`,
    '  counter dropped { }',
    '  chain input { type filter hook input priority filter - 10; policy accept; }',
    '}',
    `flush chain ${T} input`,
    `add rule ${T} input meta iifgroup ${HOST_VETH_GROUP} meta iifkind "veth" counter name dropped drop`,
    '',
  ].join('\n');
}

/**
 * Podwire's host veths made before the group was set (they carry its alias) join the group, before
 * the rule that keys on it replaces one that keyed on the name. Equivalent to: `ip link set dev NAME
 * group HOST_VETH_GROUP` for each.
 */
export function groupLegacyHostVeths(nl: Rtnetlink): string[] {
  const joined: string[] = [];
  for (const l of nl.links())
    if (
      l.kind === 'veth' &&
      l.name.startsWith(HOST_VETH_PREFIX) &&
      l.alias?.startsWith(HOST_VETH_ALIAS_PREFIX) &&
      l.group !== HOST_VETH_GROUP
    ) {
      nl.setLinkGroup(l.index, HOST_VETH_GROUP);
      joined.push(l.name);
    }
  return joined;
}

/** Installs the table; a node without `nft` gets a warning instead (the datapath still works). */
export async function installHostVethInput(
  nft: Nft,
  nl: Rtnetlink,
  warn: (message: string, fields: Record<string, unknown>) => void,
): Promise<void> {
  groupLegacyHostVeths(nl);
  try {
    await nft.apply(hostVethInputScript());
  } catch (err) {
    warn(
      'host veth input guard not installed (needs nft): packets a pod sends to a host veth itself reach the node',
      {
        err: String(err),
      },
    );
  }
}
