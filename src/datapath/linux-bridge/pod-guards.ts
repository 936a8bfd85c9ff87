/**
 * The pods' guards of one Linux-bridge datapath (pod-guard.ts): the table once per start, then per pod
 * its elements, with what each pod was guarded as remembered (and read back from the kernel's sets at
 * start), so that DEL and CHECK need only the host veth's name and reconcile only the addresses.
 */

import { CheckFailedError, DatapathError } from '../../base/errors.js';
import type { Prefix } from '../../base/ip.js';
import { podMac } from '../../base/pod-mac.js';
import type { NfTables } from '../../kernel/netlink/nf-tables.js';
import type { Nft } from '../../kernel/nft.js';
import type { GatewayAddress, PodPort } from '../datapath.js';
import { onUnderlay, podCidrs } from '../pod-cidrs.js';
import {
  addPodGuard,
  guardUplinkScript,
  missingPodGuard,
  type PodIdentity,
  podGuardDrops,
  podGuardScript,
  readPodIdentities,
  removePodGuard,
  replacePodGuard,
} from './pod-guard.js';

export class PodGuards {
  readonly #nf: NfTables;
  readonly #nft: Nft;
  readonly #pods: Map<string, PodIdentity>;
  /** The node's pod CIDRs: a pod with addresses, none in them, is a pool pod (pod-cidrs.ts). */
  readonly #cidrs: Prefix[];

  private constructor(nft: Nft, nf: NfTables, pods: Map<string, PodIdentity>, cidrs: Prefix[]) {
    this.#nft = nft;
    this.#nf = nf;
    this.#pods = pods;
    this.#cidrs = cidrs;
  }

  /** Installs or updates the table (`nft`, at start only), and reads back the pods it guards. */
  static async start(nft: Nft, nf: NfTables, gateways: readonly GatewayAddress[]): Promise<PodGuards> {
    await nft.apply(podGuardScript());
    return new PodGuards(nft, nf, readPodIdentities(nf), podCidrs(gateways));
  }

  /** Bridging mode: the uplink joins the bridge, with the node's MAC (`mac`), or, undefined, leaves it. */
  uplink(ifname: string, mac: string | undefined): Promise<void> {
    return this.#nft.apply(guardUplinkScript(ifname, mac));
  }

  /**
   * Guards the pod's port. A port without MAC (reconcile after a restart) keeps what the kernel holds
   * for it, or, when nothing is there, the MAC ADD gives a pod with these addresses (base/pod-mac.ts).
   */
  add(port: PodPort): void {
    const known = this.#pods.get(port.hostIfname);
    let p: PodIdentity;
    if (port.podMac !== '') p = { hostIfname: port.hostIfname, mac: port.podMac, ips: port.podIps };
    else if (known?.mac) p = { ...known, ips: port.podIps.length > 0 ? port.podIps : known.ips };
    else if (port.podIps.length > 0)
      p = { hostIfname: port.hostIfname, mac: podMac(port.podIps), ips: port.podIps };
    else throw new DatapathError(`no MAC or address to guard ${port.hostIfname} with`);
    p.underlay = onUnderlay(p.ips, this.#cidrs);
    // A pod re-added with other addresses (reconcile from the claims) loses what it had.
    const same = (a: string[], b: string[]) => [...a].sort().join() === [...b].sort().join();
    if (
      known?.mac &&
      (known.mac !== p.mac || !same(known.ips, p.ips) || Boolean(known.underlay) !== p.underlay)
    )
      replacePodGuard(this.#nf, known, p);
    else addPodGuard(this.#nf, p);
    this.#pods.set(port.hostIfname, p);
  }

  /** Removes the port's guard; nothing to do when there is none. */
  remove(hostIfname: string): void {
    const p = this.#pods.get(hostIfname);
    if (!p) return;
    if (p.mac) removePodGuard(this.#nf, p);
    this.#pods.delete(hostIfname);
  }

  /** Throws ERR_CHECK_FAILED when the port's guard is not (all) in the kernel. */
  check(hostIfname: string): void {
    const p = this.#pods.get(hostIfname);
    if (!p?.mac) throw new CheckFailedError(`host veth ${hostIfname} has no pod guard`);
    const missing = missingPodGuard(this.#nf, p);
    if (missing !== undefined)
      throw new CheckFailedError(
        `pod guard of ${hostIfname} is incomplete: set ${missing} lacks its elements`,
      );
  }

  /** The MAC the port's guard holds (what the pod's frames are let through with); undefined without a guard. */
  macOf(hostIfname: string): string | undefined {
    return this.#pods.get(hostIfname)?.mac || undefined;
  }

  /** The host veths guarded now. */
  names(): string[] {
    return [...this.#pods.keys()];
  }

  drops(): Array<{ guard: string; packets: number }> {
    return podGuardDrops(this.#nf);
  }
}
