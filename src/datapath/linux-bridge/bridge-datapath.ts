/**
 * The Linux-bridge datapath: pods' host veths are ports of one bridge, which holds the gateway
 * addresses. Needs nothing but the kernel, and `nft` for the gateway's ARP guard (without it, or on a
 * kernel before 5.16, the guard is missing and the agent says so).
 */
import { readFileSync } from 'node:fs';
import { constants } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { CheckFailedError, DatapathError } from '../../base/errors.js';
import { randomLocalMac } from '../../base/mac.js';
import { KernelError } from '../../kernel/libc.js';
import { NfTables } from '../../kernel/netlink/nf-tables.js';
import type { Rtnetlink } from '../../kernel/netlink/rtnetlink.js';
import { BR_STATE_DISABLED, BR_STATE_FORWARDING } from '../../kernel/netlink/uapi/if-link.js';
import type { Nft } from '../../kernel/nft.js';
import type { SysctlWriter } from '../../kernel/sysctl.js';
import { ChecksumHop } from '../checksum-ifb.js';
import type { Datapath, DatapathStatus, GatewayAddress, PodPort, UplinkPort } from '../datapath.js';
import { configureGateway } from '../gateway.js';
import type { PolicyBackend } from '../policy-backend.js';
import { installUplinkArpGuard, removeUplinkArpGuard } from '../uplink-arp-guard.js';
import { gatewayArpGuardDrops, installGatewayArpGuard } from './gateway-arp-guard.js';
import { NftPolicyBackend } from './nft-policy-backend.js';
import { PodForwarding } from './pod-forwarding.js';
import { PodGuards } from './pod-guards.js';

export interface BridgeDatapathOptions {
  /** A netlink socket in the node namespace, owned by the caller. */
  nl: Rtnetlink;
  bridge: string;
  mtu: number;
  gateways: GatewayAddress[];
  /** Writes sysctls of the node namespace (the agent's own: `writeSysctl`). */
  sysctl: SysctlWriter;
  /** Applies nftables scripts in the node namespace (the gateway's ARP guard). */
  nft: Nft;
  /** Told, once, when the gateway's ARP guard cannot be installed. */
  warn?: (message: string, fields: Record<string, unknown>) => void;
  /** The pods' guards (pod-guard.ts); default true. False: `podGuards: off`, warned at start. */
  podGuards?: boolean;
  /**
   * nf_tables over netlink in the node namespace, owned by the caller; when absent, start() opens one
   * in the calling thread's namespace (the agent's, which is the node's) and stop() closes it.
   */
  nf?: NfTables;
}

/** A port of a bridge without STP forwards within milliseconds of coming up. */
const FORWARDING_TIMEOUT_MS = 2000;

/** The br_netfilter switches NetworkPolicy depends on (bridge-netfilter.ts turns them on). */
const BRIDGE_NF_CALL = ['bridge-nf-call-iptables', 'bridge-nf-call-ip6tables'];

export class BridgeDatapath implements Datapath {
  readonly kind = 'linux-bridge';
  /**
   * On: a checksum the pod leaves to offload is completed by the checksum hop (checksum-ifb.ts) before
   * the bridge and its guards see the frame. Without the hop it would be completed wherever the node's
   * kernel next needs it (re-fragmenting, the VXLAN path, an uplink without offload), after the guards,
   * at the offsets the pod chose: 16 bits of its source address rewritten past the guard (decision 32).
   */
  readonly podTxChecksumming = true;
  /** The bridge receives after tc ingress: a pod's egress rate is shaped on the hop (pod-bandwidth.ts). */
  readonly podEgressShaping = true;
  readonly #o: BridgeDatapathOptions;
  /** Index of the bridge; 0 until start() succeeded. */
  #bridgeIndex = 0;
  /** Bridging mode: the uplink's index, a trunk of every pod VLAN; 0 when not attached. */
  #uplinkIndex = 0;
  /** Whether the bridge filters VLANs; undefined until start() asked the kernel. */
  #vlanFiltering: boolean | undefined;
  #guardWarned = false;
  #podGuardsWarned = false;
  /** The pods' guards; undefined until start(), and when they are off. */
  #pods: PodGuards | undefined;
  /** The nf_tables socket start() opened itself, closed by stop(). */
  #ownNf: NfTables | undefined;
  /** NetworkPolicy's backend and its own nf_tables socket, once asked for (policyBackend()). */
  #policy: { backend: NftPolicyBackend; nf: NfTables } | undefined;
  /** The pod ports' static forwarding entries and no unknown-unicast flooding (pod-forwarding.ts). */
  readonly #forwarding: PodForwarding;
  /** Pods' frames pass an IFB that completes their pending checksums before the guards (checksum-ifb.ts). */
  readonly #hop: ChecksumHop;

  constructor(options: BridgeDatapathOptions) {
    this.#o = options;
    this.#forwarding = new PodForwarding(options.nl);
    this.#hop = new ChecksumHop(options.nl);
  }

  /**
   * Equivalent to: `ip link add BRIDGE type bridge; ip link set BRIDGE address MAC up; ip addr add GW/LEN
   * dev BRIDGE` plus the gateway sysctls. The MAC is set explicitly so the bridge never takes over a
   * port's MAC when ports come and go: the gateway's identity on the wire must not change (I5).
   */
  async start(): Promise<void> {
    const { nl, bridge, mtu, gateways, sysctl } = this.#o;
    let link = nl.linkByName(bridge);
    if (link && link.kind !== 'bridge') {
      throw new DatapathError(`${bridge} exists and is a ${link.kind ?? 'non-bridge'} link`);
    }
    if (!link) link = nl.addBridge({ name: bridge, mtu, mac: randomLocalMac() });
    // The pod guards see a frame before the bridge learns its source MAC, except a link-local one
    // (01:80:c2:00:00:02-0f), learned where the bridge passes it up: a pod could otherwise move any
    // MAC's forwarding entry (another pod's, the gateway's, the underlay router's) to its own port.
    nl.setBridgeNoLinklocalLearn(link.index);
    configureGateway(nl, sysctl, { index: link.index, name: bridge }, gateways);
    this.#hop.start(mtu);
    await this.#guardArp(link.mac ?? '', []);
    await this.#startPodGuards();
    this.#bridgeIndex = link.index;
    // With VLAN filtering on from the start, every port is an untagged member of VLAN 1 only: a frame
    // a pod tags itself is dropped where it enters, instead of leaving the uplink on a VLAN of the
    // pod's choosing. A kernel without it cannot hold pods of a VLAN either (attachPort refuses them).
    this.#vlanFilteringOn();
  }

  /**
   * The gateway's ARP guard for its MAC and addresses (gateway-arp-guard.ts). It needs `nft` and a
   * kernel with the netdev egress hook (5.16+); where either is missing the datapath still works, with
   * `arp_announce=1` and the fixed MAC as the only defence, and says so once through `warn`.
   */
  async #guardArp(mac: string, extraIpv4s: string[]): Promise<void> {
    const { bridge, gateways, nft } = this.#o;
    const ipv4s = [...gateways.filter((g) => g.family === 4).map((g) => g.address), ...extraIpv4s];
    try {
      await installGatewayArpGuard(nft, { bridge, mac, ipv4s });
    } catch (err) {
      if (this.#guardWarned) return;
      this.#guardWarned = true;
      this.#o.warn?.(
        'gateway ARP guard not installed (needs nft and a kernel with the netdev egress hook, 5.16+)',
        {
          bridge,
          err: String(err),
        },
      );
    }
  }

  /**
   * Equivalent to: `ip link set HOSTVETH master BRIDGE up`, then waits until the bridge forwards on the
   * port. The bridge enables a port only once the kernel's linkwatch has marked the veth's operstate
   * up, which happens asynchronously after `up`; a frame sent before that is dropped. Resolving only
   * when the port forwards is what lets the pod announce itself right after (I5).
   *
   * A pod port is in hairpin mode (`bridge_slave hairpin on`): a pod that reaches a Service whose
   * backend is itself has its frame DNATed by the bridge's netfilter hook (bridge-nf-call-iptables)
   * and bridged back to its own port, which the bridge does only in hairpin mode (decision 19).
   *
   * And it receives only what is for the pod: a static forwarding entry for the pod's MAC and no
   * unknown unicast (`flood off`), so a pod silent beyond the ageing time is not flooded to every
   * other pod (pod-forwarding.ts, decision 26).
   */
  async attachPort(port: PodPort): Promise<void> {
    // A re-attach (reconcile: no MAC given) of a veth that is not a port of this bridge: the bridge was
    // recreated while the agent was away, and the pod's VLAN, which only the port kept, went with it.
    // Attached as asked it would join VLAN 1, the node's own L2 (issue 15, finding 10). Refused, as OVS
    // refuses a pod it has no record of; reconcile then attaches afresh from the claims, or leaves a
    // pool pod detached (its VLAN is not in its claims).
    if (port.podMac === '' && this.#o.nl.linkByIndex(port.hostIfindex)?.masterIndex !== this.#requireBridge())
      throw new DatapathError(
        `nothing recorded of ${port.hostIfname}: it is not a port of ${this.#o.bridge} (recreated?), and a VLAN it had went with its old bridge`,
      );
    await this.#attach(port, true);
  }

  /**
   * `podPort`: a pod's port, which gets its guard before it joins the bridge and comes up, and hairpin
   * mode; false for the uplink in bridging mode.
   */
  async #attach(port: PodPort, podPort: boolean): Promise<void> {
    const nl = this.#o.nl;
    // Before the port comes up (and on a re-attach, where an older agent left none): no frame of the
    // pod meets the guard with a checksum still pending.
    if (podPort) this.#hop.redirect(port.hostIfindex, port.hostIfname);
    if (podPort) this.#pods?.add(port);
    const vlan = port.vlan ?? 0;
    if (vlan) this.#requireVlanFiltering(vlan);
    nl.setMaster(port.hostIfindex, this.#requireBridge());
    if (podPort) nl.setBridgePortHairpin(port.hostIfindex, true);
    if (vlan) {
      // An access port of the pool's VLAN (`bridge vlan add dev HOSTVETH vid V pvid untagged; bridge
      // vlan del dev HOSTVETH vid 1`), and the uplink a trunk that carries it tagged.
      nl.addBridgeVlan(port.hostIfindex, vlan, { pvid: true, untagged: true });
      nl.deleteBridgeVlan(port.hostIfindex, 1);
      if (this.#uplinkIndex !== 0) nl.addBridgeVlan(this.#uplinkIndex, vlan);
    }
    // After the VLANs: the kernel refuses an entry for a VLAN the port does not have.
    if (podPort) {
      // ADD knows the pod's VLAN (none: the default, 1); a re-attach is not told it, and reads the port's.
      const known = port.vlan || (port.podMac !== '' ? 1 : undefined);
      this.#forwarding.pin(port, this.#fdbVlan(port.hostIfindex, known), this.#pods?.macOf(port.hostIfname));
    }
    nl.setLinkUp(port.hostIfindex);
    const deadline = performance.now() + FORWARDING_TIMEOUT_MS;
    for (let delay = 1; ; delay = Math.min(delay * 2, 20)) {
      const link = nl.linkByIndex(port.hostIfindex);
      if (link?.bridgePortState === BR_STATE_FORWARDING) return;
      if (performance.now() > deadline) {
        throw new DatapathError(
          `port ${port.hostIfname} of ${this.#o.bridge} not forwarding after ${FORWARDING_TIMEOUT_MS} ms (state ${link?.bridgePortState})`,
        );
      }
      await sleep(delay);
    }
  }

  /**
   * Equivalent to: `ip link set BRIDGE address MAC; ip link set UPLINK master BRIDGE up`, then waits
   * until the bridge forwards on it.
   */
  async attachUplink(uplink: UplinkPort): Promise<void> {
    const bridge = this.#requireBridge();
    // Before the uplink joins: the node-local pods' ARP never reaches the underlay (uplink-arp-guard.ts).
    await installUplinkArpGuard(this.#o.nft, uplink.ifname, this.#o.gateways, this.#o.warn);
    this.#o.nl.setMac(bridge, uplink.mac);
    // The node's addresses become the bridge interface's own, with the uplink's MAC.
    await this.#guardArp(
      uplink.mac,
      uplink.ips.filter((ip) => !ip.includes(':')),
    );
    // Before it joins too: no frame crosses between the uplink and a plain pod (pod-guard.ts, forward).
    await this.#pods?.uplink(uplink.ifname, uplink.mac);
    // Never hairpin on the uplink: the underlay's own floods would come back to it.
    await this.#attach(
      {
        hostIfname: uplink.ifname,
        hostIfindex: uplink.index,
        containerId: '',
        ifname: '',
        podMac: '',
        podIps: [],
      },
      false,
    );
    this.#uplinkIndex = uplink.index;
    // Pods of a VLAN attached before (an agent restart re-attaches the uplink): the uplink carries them.
    for (const vid of this.#podVlans()) this.#o.nl.addBridgeVlan(uplink.index, vid);
  }

  /** Equivalent to: `ip link set UPLINK nomaster; ip link set BRIDGE address TARGETMAC`. */
  async detachUplink(uplink: { ifname: string; index: number; targetMac: string }): Promise<void> {
    const link = this.#o.nl.linkByIndex(uplink.index);
    if (link && link.masterIndex === this.#bridgeIndex && this.#bridgeIndex !== 0)
      this.#o.nl.setMaster(uplink.index, 0);
    // Tolerant, as the rest of the way back: a guard table removed by hand must not keep the MAC below.
    await this.#pods?.uplink(uplink.ifname, undefined).catch(() => undefined);
    const bridge = this.#o.nl.linkByName(this.#o.bridge);
    if (bridge) {
      this.#o.nl.setMac(bridge.index, uplink.targetMac);
      await this.#guardArp(uplink.targetMac, []);
    }
    await removeUplinkArpGuard(this.#o.nft).catch(() => undefined); // not there when it could not be installed
    this.#uplinkIndex = 0;
  }

  /** Equivalent to: `bridge link set dev HOSTVETH state 0` (disabled); nothing to do when the link is gone. */
  async isolatePort(hostIfname: string): Promise<void> {
    const link = this.#o.nl.linkByName(hostIfname);
    if (link && link.masterIndex === this.#bridgeIndex)
      this.#o.nl.setBridgePortState(link.index, BR_STATE_DISABLED);
    // The guard leaves with the port (DEL isolates, then deletes the veth); the static entry goes with
    // the veth, and until then points at a disabled port. A new pod of the same MAC moves it to its own.
    this.#pods?.remove(hostIfname);
    this.#forwarding.forget(hostIfname);
  }

  /** Equivalent to: `ip link set HOSTVETH nomaster`; nothing to do when the link is gone. */
  async detachPort(hostIfname: string): Promise<void> {
    const link = this.#o.nl.linkByName(hostIfname);
    if (link && link.masterIndex === this.#bridgeIndex) this.#o.nl.setMaster(link.index, 0);
    this.#pods?.remove(hostIfname);
    this.#forwarding.forget(hostIfname); // its entries left the bridge with it
  }

  async checkPort(hostIfname: string): Promise<void> {
    const link = this.#o.nl.linkByName(hostIfname);
    if (!link) throw new CheckFailedError(`host veth ${hostIfname} does not exist`);
    if (link.masterIndex !== this.#requireBridge()) {
      throw new CheckFailedError(`host veth ${hostIfname} is not a port of ${this.#o.bridge}`);
    }
    if (!link.up) throw new CheckFailedError(`host veth ${hostIfname} is down`);
    if (link.bridgePortHairpin === false)
      throw new CheckFailedError(`host veth ${hostIfname} is not in hairpin mode`);
    this.#forwarding.check(link, () => ({
      mac: this.#pods?.macOf(hostIfname),
      vlan: this.#fdbVlan(link.index),
    }));
    this.#pods?.check(hostIfname);
    this.#hop.check(hostIfname, link.index);
  }

  async ports(): Promise<string[]> {
    const index = this.#requireBridge();
    const names = this.#o.nl
      .links()
      .filter((l) => l.masterIndex === index)
      .map((l) => l.name);
    // A guard whose veth is gone (the agent was down at DEL) is a port for reconcile to detach.
    for (const name of this.#pods?.names() ?? []) if (!names.includes(name)) names.push(name);
    return names;
  }

  /** What the gateway's ARP guard dropped (gateway-arp-guard.ts). */
  async dropCounters(): Promise<Array<{ guard: string; packets: number }>> {
    return [
      { guard: 'GATEWAY_ARP_GUARD', packets: await gatewayArpGuardDrops(this.#o.nft) },
      ...(this.#pods?.drops() ?? []),
    ];
  }

  status(): DatapathStatus {
    if (this.#bridgeIndex === 0) return { ready: false, reason: 'bridge not set up yet' };
    const link = this.#o.nl.linkByIndex(this.#bridgeIndex);
    if (!link || link.name !== this.#o.bridge)
      return { ready: false, reason: `bridge ${this.#o.bridge} is gone` };
    if (!link.up) return { ready: false, reason: `bridge ${this.#o.bridge} is down` };
    return { ready: true };
  }

  /** Whether pods are guarded (`podwire status`): off only with `podGuards: off`. */
  get podGuards(): 'on' | 'off' {
    return this.#o.podGuards === false ? 'off' : 'on';
  }

  /**
   * NetworkPolicy on this node (nft-policy-backend.ts: its own inet table, judged in forward through
   * br_netfilter), on an nf_tables socket of its own; made once.
   */
  policyBackend(): PolicyBackend {
    // Frames between two pods of this bridge meet the inet hooks only through br_netfilter: without
    // it, policy would judge nothing on one node. Read in the agent's own namespace (per netns).
    for (const key of BRIDGE_NF_CALL) {
      let value: string | undefined;
      try {
        value = readFileSync(`/proc/sys/net/bridge/${key}`, 'utf8').trim();
      } catch {
        value = undefined;
      }
      if (value !== '1')
        throw new DatapathError(
          `NetworkPolicy on the Linux bridge needs net.bridge.${key}=1, or pod-to-pod traffic on this node would pass unjudged; it is ${value ?? 'absent: br_netfilter is not loaded (modprobe br_netfilter)'}`,
        );
    }
    if (!this.#policy) {
      const nf = NfTables.open();
      this.#policy = { backend: new NftPolicyBackend(this.#o.nft, nf), nf };
    }
    return this.#policy.backend;
  }

  async stop(): Promise<void> {
    this.#policy?.nf.close();
    this.#policy = undefined;
    this.#bridgeIndex = 0;
    this.#pods = undefined;
    this.#forwarding.clear();
    this.#ownNf?.close();
    this.#ownNf = undefined;
  }

  /**
   * The pods' guards (pod-guard.ts): the table by `nft`, once, then the elements of the pods the kernel
   * already guards read back (a restart). A kernel or node without what they need stops the start,
   * naming it, unless the operator turned them off.
   */
  async #startPodGuards(): Promise<void> {
    if (this.#o.podGuards === false) {
      if (this.#podGuardsWarned) return;
      this.#podGuardsWarned = true;
      this.#o.warn?.(
        'pod guards are off (podGuards: off): a pod on this bridge can claim any address or MAC',
        {
          bridge: this.#o.bridge,
        },
      );
      return;
    }
    if (this.#pods) return;
    let nf = this.#o.nf;
    try {
      if (!nf) {
        nf = NfTables.open();
        this.#ownNf = nf;
      }
      this.#pods = await PodGuards.start(this.#o.nft, nf, this.#o.gateways);
    } catch (err) {
      this.#ownNf?.close();
      this.#ownNf = undefined;
      throw new DatapathError(
        `pod guards cannot be installed: they need nf_tables with the bridge family (CONFIG_NF_TABLES, CONFIG_NF_TABLES_BRIDGE; where built as modules, nf_tables and nft_meta_bridge loadable) and the nft program; set podGuards: off to run without them (${String(err)})`,
      );
    }
  }

  /** The VLANs (other than the default, 1) of the bridge's ports, the uplink's aside: one dump of each kind. */
  #podVlans(): Set<number> {
    const { nl } = this.#o;
    const byPort = nl.allBridgeVlans();
    const vids = new Set<number>();
    for (const l of nl.links()) {
      if (l.masterIndex !== this.#bridgeIndex || l.index === this.#uplinkIndex) continue;
      for (const v of byPort.get(l.index) ?? []) if (v.vid !== 1) vids.add(v.vid);
    }
    return vids;
  }

  /**
   * The VLAN the bridge looks a pod's MAC up in: none without VLAN filtering; else `known` (ADD: the
   * pod's pool's, or the default 1), or the port's pvid, which the port kept (re-attach, CHECK).
   */
  #fdbVlan(hostIfindex: number, known?: number): number {
    if (!this.#vlanFiltering) return 0;
    if (known !== undefined) return known;
    return this.#o.nl.bridgeVlans(hostIfindex).find((v) => v.pvid)?.vid ?? 1;
  }

  /**
   * A pod of a VLAN needs the bridge to filter VLANs (`ip link set BRIDGE type bridge vlan_filtering 1`,
   * done at start). A kernel built without CONFIG_BRIDGE_VLAN_FILTERING refuses, and so does the ADD,
   * clearly.
   */
  #requireVlanFiltering(vlan: number): void {
    if (!this.#vlanFilteringOn())
      throw new DatapathError(
        `pod VLAN ${vlan}: the kernel's bridge ${this.#o.bridge} cannot filter VLANs (built without CONFIG_BRIDGE_VLAN_FILTERING); pools with a VLAN need such a kernel or the OVS datapath`,
      );
  }

  /** Turns VLAN filtering on once (idempotent in the kernel); false when the kernel cannot. */
  #vlanFilteringOn(): boolean {
    if (this.#vlanFiltering === undefined) {
      try {
        this.#o.nl.setBridgeVlanFiltering(this.#requireBridge(), true);
        this.#vlanFiltering = true;
      } catch (err) {
        if (!(err instanceof KernelError && err.errno === constants.errno.EOPNOTSUPP)) throw err;
        this.#vlanFiltering = false;
      }
    }
    return this.#vlanFiltering;
  }

  #requireBridge(): number {
    if (this.#bridgeIndex === 0) throw new DatapathError('linux-bridge datapath not started');
    return this.#bridgeIndex;
  }
}
