/**
 * What the bridge forwards to a pod's port (decision 26): frames for the pod's MAC, by a static
 * forwarding entry, and no unicast for a destination the bridge does not know. Without them a pod
 * silent for longer than the bridge's ageing time (300 s) loses its learned entry, and the bridge
 * floods unicast for it out of every port, to every other pod of the node, until it speaks again. OVS
 * forwards by one exact `dl_dst` flow per pod and never floods unknown unicast to pods
 * (pipeline.ts, table 50); this is the Linux bridge's equivalent. Broadcast and multicast (ARP
 * requests, ND) still reach every port: they are other flags of the port. The uplink in bridging mode
 * keeps flooding (unknown unicast goes to the underlay, as on OVS) and gets no entry.
 *
 * The entries go with the port: the kernel removes a port's entries, static ones too, when it leaves
 * the bridge or its veth is deleted, so DEL has nothing to remove.
 */
import { CheckFailedError, DatapathError } from '../../base/errors.js';
import { normalizeMac } from '../../base/mac.js';
import { podMac } from '../../base/pod-mac.js';
import { isStaticMasterEntry, isStickyEntry } from '../../kernel/netlink/bridge-port.js';
import type { Rtnetlink } from '../../kernel/netlink/rtnetlink.js';
import type { FdbEntry, Link } from '../../kernel/netlink/types.js';
import type { PodPort } from '../datapath.js';

/** A pod port's static entry: its MAC, in the VLAN the bridge looks it up in (0: no VLAN filtering). */
interface Pinned {
  mac: string;
  vlan: number;
}

const pinnedText = (e: Pinned): string => (e.vlan === 0 ? e.mac : `${e.mac} vlan ${e.vlan}`);

export class PodForwarding {
  readonly #nl: Rtnetlink;
  /** What each pod port was pinned with, by host veth; CHECK compares the kernel with it. */
  readonly #ports = new Map<string, Pinned>();

  constructor(nl: Rtnetlink) {
    this.#nl = nl;
  }

  /**
   * Equivalent to: `bridge link set dev HOSTVETH flood off; bridge fdb replace MAC dev HOSTVETH master
   * static sticky [vlan VID]`, on a port of the bridge before it comes up, so the pod never receives another's
   * flooded unicast. A re-attach (reconcile after a restart: no MAC given) pins the MAC the pod guards
   * hold for the port (`guardMac`), or, with the guards off, the one a static entry of the port already
   * has, or else the MAC ADD derives from the addresses (base/pod-mac.ts); an entry already there is
   * left as it is (made sticky if it is not), and static entries of the port for another MAC or VLAN are removed.
   */
  pin(port: PodPort, vlan: number, guardMac: string | undefined): void {
    const nl = this.#nl;
    nl.setBridgePortUnicastFlood(port.hostIfindex, false);
    if (port.podMac !== '') {
      // ADD: the veth is new, so the port has no entry of its own yet.
      const mac = normalizeMac(port.podMac);
      nl.setBridgeStaticFdb({ index: port.hostIfindex, mac, vlan });
      this.#ports.set(port.hostIfname, { mac, vlan });
      return;
    }
    const statics = nl.bridgePortFdb(port.hostIfindex).filter(isStaticMasterEntry);
    const mac = guardMac ?? statics[0]?.mac ?? (port.podIps.length > 0 ? podMac(port.podIps) : undefined);
    if (mac === undefined) throw new DatapathError(`no MAC to pin ${port.hostIfname}'s forwarding entry to`);
    const want: Pinned = { mac: normalizeMac(mac), vlan };
    for (const e of statics)
      if (!same(e, want)) nl.deleteBridgeFdb({ index: port.hostIfindex, mac: e.mac, vlan: e.vlan });
    if (!statics.some((e) => same(e, want) && isStickyEntry(e)))
      nl.setBridgeStaticFdb({ index: port.hostIfindex, mac: want.mac, vlan });
    this.#ports.set(port.hostIfname, want);
  }

  /**
   * Throws ERR_CHECK_FAILED, naming what differs, when the port floods unknown unicast or lacks its
   * sticky static entry. `link` is the port as the kernel reports it now. A port not pinned by this datapath
   * (restarted, not yet re-attached) is held to `unpinned()`: the MAC its guard holds in that VLAN, or,
   * with the guards off (`mac` undefined), any static entry in that VLAN.
   */
  check(link: Link, unpinned: () => { mac: string | undefined; vlan: number }): void {
    if (link.bridgePortUnicastFlood !== false)
      throw new CheckFailedError(
        `host veth ${link.name} floods unknown unicast (bridge port flag flood is on)`,
      );
    const entries = this.#nl.bridgePortFdb(link.index);
    const pinned = this.#ports.get(link.name);
    const { mac, vlan } = pinned ?? unpinned();
    const want = mac === undefined ? undefined : { mac: normalizeMac(mac), vlan };
    const statics = entries.filter(isStaticMasterEntry);
    const pinnedHere = (e: FdbEntry) => isStickyEntry(e) && (want ? same(e, want) : (e.vlan ?? 0) === vlan);
    if (statics.some(pinnedHere)) return;
    if (!want)
      throw new CheckFailedError(
        `host veth ${link.name} has no sticky static forwarding entry${vlan === 0 ? '' : ` in vlan ${vlan}`}`,
      );
    const found = entries
      .filter((e) => e.mac === want.mac)
      .map(
        (e) =>
          `${isStaticMasterEntry(e) ? 'static' : 'not static'}${isStickyEntry(e) ? ' sticky' : ''} vlan ${e.vlan ?? 0}`,
      );
    throw new CheckFailedError(
      `host veth ${link.name} lacks its sticky static forwarding entry ${pinnedText(want)} (the bridge has ${found.length > 0 ? found.join(', ') : 'none for that MAC on the port'})`,
    );
  }

  /** Forgets the port (DEL, detach): the kernel removes its entries with the port. */
  forget(hostIfname: string): void {
    this.#ports.delete(hostIfname);
  }

  clear(): void {
    this.#ports.clear();
  }
}

function same(e: FdbEntry, want: Pinned): boolean {
  return e.mac === want.mac && (e.vlan ?? 0) === want.vlan;
}
