/**
 * The Open vSwitch datapath: pods' host veths are ports of one OVS bridge, the gateway is an OVS
 * internal port holding the first address of each pod CIDR, and the OpenFlow pipeline of
 * `pipeline.ts` decides who may say what. OVSDB is spoken directly (no ovs-vsctl); flows go over one
 * persistent OpenFlow 1.3 connection to the bridge (openflow/flow-table.ts), each pod operation's
 * flows in one atomic bundle. No process is spawned in ADD, DEL or CHECK.
 *
 * Everything podwire needs to rebuild a pod's flows is in the external_ids of its Port row, so the
 * whole wanted flow table can be derived from OVSDB at any time ("replay"), and a replace leaves
 * every flow that is still right untouched: running pods never see a gap. A replay runs at start
 * and whenever the OpenFlow connection comes back (a restarted ovs-vswitchd starts with an empty
 * table and forgets no-flood marks) or OVSDB does. While the switch is away or a replay runs, ADD
 * and CHECK answer "not available" at once; DEL still succeeds (the next replay drops what it left).
 */

import { dirname } from 'node:path';
import { DatapathError, NotAvailableError } from '../../base/errors.js';
import type { Prefix } from '../../base/ip.js';
import type { Rtnetlink } from '../../kernel/netlink/rtnetlink.js';
import type { Nft } from '../../kernel/nft.js';
import type { SysctlWriter } from '../../kernel/sysctl.js';
import type { Datapath, DatapathStatus, GatewayAddress, PodPort, UplinkPort } from '../datapath.js';
import { onUnderlay, podCidrs } from '../pod-cidrs.js';
import type { PolicyBackend } from '../policy-backend.js';
import { installUplinkArpGuard, removeUplinkArpGuard } from '../uplink-arp-guard.js';
import { FloodSync, floodFlows } from './flood-flows.js';
import { configureGatewayLink, ensureGatewayPort, setGatewayMac } from './gateway-port.js';
import { GroupCommit } from './group-commit.js';
import { NetdevIngressHop } from './netdev-ingress-hop.js';
import { OfportPool } from './ofport-pool.js';
import { FlowTable } from './openflow/flow-table.js';
import { OvsdbError } from './ovsdb-client.js';
import { OvsdbConnection } from './ovsdb-connection.js';
import {
  type GatewayFlowsInput,
  PIPELINE_COOKIE,
  pipelineFlows,
  podCookie,
  podFlows,
  TABLE_NAMES,
  UNDERLAY_FLOOD_COOKIE,
} from './pipeline.js';
import { isolatedPolicyFlows, POLICY_COOKIE, POLICY_COOKIE_MASK } from './policy-flows.js';
import { OvsPolicyBackend } from './policy-ovs-backend.js';
import { checkPodPort } from './port-check.js';
import {
  EXT_ROLE,
  parsePodExternalIds,
  podExternalIds,
  ROLE_POD,
  ROLE_UPLINK,
  recordOnUnderlay,
} from './port-record.js';
import { purgeDatapathCache } from './unixctl.js';
import { dropKernelIngress, restoreKernelIngress } from './uplink-ingress.js';
import type { PortRow, VswitchDb } from './vswitch-db.js';

export interface OvsDatapathOptions {
  /** A netlink socket in the node namespace (where ovs-vswitchd runs), owned by the caller. */
  nl: Rtnetlink;
  /** Writes sysctls of the node namespace. */
  sysctl: SysctlWriter;
  /**
   * Applies nftables scripts in the node namespace (bridging on the userspace datapath; the checksum
   * hop's chain of each pod port on the kernel datapath).
   */
  nft: Nft;
  gateways: GatewayAddress[];
  mtu: number;
  bridge: string;
  /** Name of the gateway's internal port. */
  gateway: string;
  /** The OVSDB socket, e.g. `unix:/run/openvswitch/db.sock`. */
  ovsdb: string;
  datapathType: 'system' | 'netdev';
  /** OpenFlow endpoint; by default the bridge's management socket beside the OVSDB socket. */
  openflow?: string;
  /**
   * ovs-vswitchd's control socket (unixctl.ts), to flush the datapath's flow cache after a policy
   * change; by default found in the run directory of the OVSDB socket.
   */
  unixctl?: string;
  /** How long ovs-vswitchd may take to open a port. */
  portTimeoutMs?: number;
  /** Told when the uplink's ARP guard cannot be installed (uplink-arp-guard.ts), and of switch outages. */
  warn?: (message: string, fields: Record<string, unknown>) => void;
  /** Told when the switch is back and its flows are replayed. */
  info?: (message: string, fields: Record<string, unknown>) => void;
  /** How long start() waits for the bridge's OpenFlow connection. */
  connectTimeoutMs?: number;
  /**
   * NetworkPolicy will be enforced on this bridge (policyBackend()). A replay that finds no policy
   * flows in the switch (ovs-vswitchd restarted with an empty table) before the backend's first apply
   * isolates every local pod both ways until that apply, instead of forwarding unjudged.
   */
  policy?: boolean;
}

/** Pod ports' OpenFlow numbers start here (ofport-pool.ts); the gateway and uplink keep the low ones. */
const POD_OFPORT_BASE = 100;

/**
 * The OpenFlow versions the bridge speaks: 1.3 for podwire's flows (bundles as OVS's extension to
 * 1.3), 1.0 only for the ports' no-flood bit, 1.4 and 1.5 for a person's ovs-ofctl.
 */
const PROTOCOLS = ['OpenFlow10', 'OpenFlow13', 'OpenFlow14', 'OpenFlow15'];

/** Where ovs-vswitchd puts `BRIDGE.mgmt`: its run directory, which also holds `db.sock` by default. */
export function defaultOpenflowTarget(ovsdb: string, bridge: string): string {
  return `unix:${runDirOf(ovsdb)}/${bridge}.mgmt`;
}

function runDirOf(ovsdb: string): string {
  return dirname(ovsdb.startsWith('unix:') ? ovsdb.slice(5) : ovsdb);
}

export class OvsDatapath implements Datapath {
  readonly kind = 'ovs';
  /**
   * Off on both OVS datapaths. The userspace one forwards a frame as the pod's kernel left it: with
   * transmit checksum offload on, TCP segments would leave the pod with no checksum filled in (decision
   * 8). The kernel one would complete a pending checksum after the guard flows, at the offsets the pod
   * chose (decision 32): off, that happens in the pod. A pod with CAP_NET_ADMIN may turn it back on;
   * on the kernel datapath the checksum hop (netdev-ingress-hop.ts) completes what it leaves pending
   * before the guard flows, and on the userspace datapath the victim drops the unfinished frame.
   */
  readonly podTxChecksumming = false;
  /**
   * Neither: an egress rate is shaped on tc ingress, which ovs-vswitchd owns on its ports (its ingress
   * policing deletes the qdisc from a port without a policing rate, at attach and at every restart).
   */
  readonly podEgressShaping = false;
  readonly #o: OvsDatapathOptions;
  /** The checksum hop of pod ports, on the kernel datapath only (netdev-ingress-hop.ts). */
  readonly #hop: NetdevIngressHop | undefined;
  readonly #openflowTarget: string;
  /** The bridge's flow table over OpenFlow; opened by start(), closed by stop(). */
  #flows: FlowTable | undefined;
  /** True while the switch holds the wanted state: connected, and replayed since it (re)connected. */
  #switchReady = false;
  /** The replay running now, if any. */
  #replaying: Promise<void> | undefined;
  /** Counts the replays asked for: only the latest one may say the switch is ready. */
  #replayGeneration = 0;
  #replayRetry: NodeJS.Timeout | undefined;
  /** Port operations (attach, detach, CHECK) in flight: a replay waits for them to settle. */
  #portOps = 0;
  #portOpsSettled: (() => void) | undefined;
  /** OpenFlow numbers that pod ports have or asked for; refreshed from OVSDB by every replay. */
  readonly #ofports = new OfportPool(POD_OFPORT_BASE);
  /** DEL's port removals and flow deletions, each batched while one is in flight (group-commit.ts). */
  readonly #portRemovals = new GroupCommit<PortRow>(async (rows) => (await this.#db()).removePorts(rows));
  /** The OVSDB connection (ovsdb-connection.ts); closed by stop(), made afresh on the next use. */
  readonly #ovsdb: OvsdbConnection;
  readonly #cookieDeletions = new GroupCommit<bigint>(async (cookies) => {
    const flows = this.#flows;
    if (flows) await flows.apply({ deleteCookies: cookies, atomic: false });
  });
  /** Ports opened by openPort whose attachPort (or undo) has not come yet, by host veth. */
  readonly #opening = new Map<string, Promise<void>>();
  /** Pod ports whose removal from OVSDB waits for OVSDB to come back (DEL during an outage). */
  readonly #pendingRemovals = new Set<string>();
  /**
   * ADDs whose OVSDB insert failed after their flows went out, by host veth: the number those flows
   * use, which stays taken until the ADD's undo (detachPort) has deleted them. Freed at once, it
   * would go to the next pod while the failed pod's flows still guard and forward for it.
   */
  readonly #rowless = new Map<string, number>();
  /** OpenFlow reconnects, replays and the flows they changed (`switchCounters`, the metrics). */
  readonly #counters = { openflowReconnects: 0, replays: 0, replayedFlows: 0 };
  readonly #portTimeoutMs: number;
  /** Set once start() has set up the bridge, the gateway and the pipeline; cleared by stop(). */
  #started = false;
  /** The gateway (and, in bridging mode, the uplink) as the pipeline flows name them; set by start(). */
  #gateway: GatewayFlowsInput | undefined;
  /** The multicast flows that list ports (each VLAN's, the uplink's), rewritten one at a time per group. */
  readonly #floods: FloodSync;
  /** The node's pod CIDRs: a pod with addresses, none in them, is a pool pod (pod-cidrs.ts). */
  readonly #cidrs: Prefix[];
  /** NetworkPolicy's backend, once asked for (policyBackend()); its flows are part of every replay. */
  #policy: OvsPolicyBackend | undefined;
  /** The tail of the whole-table writers' queue (#replaceAll and the policy backend's applies). */
  #tableLock: Promise<unknown> = Promise.resolve();

  constructor(options: OvsDatapathOptions) {
    this.#o = options;
    this.#hop = options.datapathType === 'system' ? new NetdevIngressHop(options.nl, options.nft) : undefined;
    this.#cidrs = podCidrs(options.gateways);
    this.#floods = new FloodSync({
      rows: async () => (await this.#db()).ports(),
      gateway: () => this.#requireGateway(),
      cidrs: this.#cidrs,
    });
    this.#portTimeoutMs = options.portTimeoutMs ?? 10_000;
    this.#openflowTarget = options.openflow ?? defaultOpenflowTarget(options.ovsdb, options.bridge);
    this.#ovsdb = new OvsdbConnection(options.ovsdb, options.bridge, {
      active: () => this.#started,
      lost: (err) =>
        options.warn?.('OVSDB connection lost; reconnecting', { ovsdb: options.ovsdb, reason: err.message }),
      // ovsdb-server may have come back with another database: make the switch match it again.
      back: () => this.#replay('OVSDB connection back'),
    });
  }

  /**
   * Creates or adopts the bridge and the gateway port, configures the gateway in the node namespace
   * (addresses, arp_announce=1, forwarding), then makes the flow table exactly the pipeline plus the
   * flows of every pod port recorded in OVSDB, in one bundle that leaves correct flows untouched.
   */
  async start(): Promise<void> {
    try {
      await this.#start();
    } catch (err) {
      // Not started: leave no connection open behind a failed start.
      this.#started = false;
      this.#ovsdb.destroy();
      await this.#flows?.close();
      this.#flows = undefined;
      throw err;
    }
  }

  async #start(): Promise<void> {
    const o = this.#o;
    const vs = await this.#db();
    await vs.ensureBridge({ datapathType: o.datapathType, protocols: PROTOCOLS });
    await this.#hop?.start(o.mtu);
    const gw = await ensureGatewayPort(vs, o, this.#portTimeoutMs);
    configureGatewayLink(o, gw.mac);
    this.#gateway = { ofport: gw.ofport, mac: gw.mac, ipv4s: this.#podGatewaysV4() };
    const flows = new FlowTable(this.#openflowTarget, { backoffMs: { initial: 50, max: 500 } });
    this.#flows = flows;
    await flows.waitUp(o.connectTimeoutMs ?? 10_000).catch((err: Error) => {
      throw new DatapathError(`OVS bridge ${o.bridge}: no OpenFlow connection to ${this.#openflowTarget}`, {
        cause: err,
      });
    });
    await this.#installAll(flows);
    flows.connection.onDown((reason) => {
      this.#switchReady = false;
      o.warn?.('OVS switch connection lost: ADD answers "not available" until it is back', {
        bridge: o.bridge,
        reason: reason.message,
      });
    });
    flows.connection.onUp(() => {
      this.#counters.openflowReconnects++;
      this.#replay('OpenFlow connection back');
    });
    this.#switchReady = true;
    this.#started = true;
  }

  /**
   * Makes the switch hold the whole wanted state, derived from OVSDB: the pipeline (with the gateway's
   * and uplink's OpenFlow ports as OVSDB has them now), every pod port's flows and the VLANs'
   * multicast flows, replacing only what differs; then the no-flood mark of every VLAN pod's port.
   */
  async #installAll(flows: FlowTable): Promise<number> {
    const vs = await this.#db();
    const rows = await vs.ports();
    const gw = this.#requireGateway(true);
    const gwRow = rows.find((r) => r.name === this.#o.gateway);
    if (gwRow?.ofport !== undefined && gwRow.ofport > 0) gw.ofport = gwRow.ofport;
    if (gw.uplinkOfport !== undefined) {
      const up = rows.find((r) => r.externalIds[EXT_ROLE] === ROLE_UPLINK);
      if (up?.ofport !== undefined && up.ofport > 0) gw.uplinkOfport = up.ofport;
    }
    const want = pipelineFlows(gw);
    const vlanPorts: string[] = [];
    const localPods: Array<{ name: string; ips: string[] }> = [];
    this.#ofports.reset(rows);
    // Numbers of failed ADDs' flows: the replace below removes those flows, and the reset freed them.
    this.#rowless.clear();
    for (const row of rows) {
      const rec = parsePodExternalIds(row.externalIds);
      // A port whose veth is gone has ofport -1; reconcile removes it, and its flows go now.
      if (!rec || row.ofport === undefined || row.ofport < 1 || this.#pendingRemovals.has(row.name)) continue;
      want.push(
        ...podFlows({
          ofport: row.ofport,
          mac: rec.mac,
          ips: rec.ips,
          cookie: podCookie(row.name),
          underlay: recordOnUnderlay(rec, this.#cidrs),
          ...(rec.vlan ? { vlan: rec.vlan } : {}),
        }),
      );
      if (rec.vlan) vlanPorts.push(row.name);
      localPods.push({ name: row.name, ips: rec.ips });
    }
    want.push(...floodFlows(rows, gw, this.#cidrs));
    // Like flows, no-flood does not outlive ovs-vswitchd: set it again, before the flows that count on
    // it, and on an uplink row even before bridging attaches it again (a start after a restart of
    // ovs-vswitchd): a plain pod's FLOOD must never reach the underlay.
    const uplinks = rows
      .filter((r) => r.externalIds[EXT_ROLE] === ROLE_UPLINK && r.ofport !== undefined && r.ofport > 0)
      .map((r) => r.name);
    for (const name of [...uplinks, ...vlanPorts]) await flows.setNoFlood(name);
    const outcome = await this.#exclusive(async () => {
      // The policy flows as last applied (with the gateway's port as it is now); before the policy
      // backend's first apply, those in the switch are kept as found (an agent restarted with
      // policies in force: none opens before the first apply), or, when the switch holds none and
      // policy is to be enforced (ovs-vswitchd restarted while the agent was away), every local pod
      // isolated until that apply.
      const policy =
        this.#policy?.flowsInForce() ??
        (this.#o.policy && (await flows.dumpMasked(POLICY_COOKIE, POLICY_COOKIE_MASK)).length === 0
          ? isolatedPolicyFlows({ gatewayOfport: gw.ofport, nodeIps: this.#nodeIps() }, localPods)
          : undefined);
      return policy === undefined
        ? flows.replace(want, { keep: { cookie: POLICY_COOKIE, mask: POLICY_COOKIE_MASK } })
        : flows.replace([...want, ...policy]);
    });
    // Only now, with every table as wanted: a restarted ovs-vswitchd that kept the kernel's flows
    // meanwhile (deploy/'s OVS container sets the flag before starting it) revalidates them against
    // these tables and handles new packets again.
    if (await vs.clearFlowRestoreWait()) {
      this.#o.info?.('OVS flows in place: flow-restore-wait cleared', { bridge: this.#o.bridge });
    }
    // A replay that changed flows where policy is enforced: the cached flows of the old tables go
    // (decision 52). Not fatal: the tables are right, and ADDs must not wait for the control socket.
    if ((this.#o.policy || this.#policy) && outcome.added + outcome.deleted > 0) {
      await this.#purgeCache().catch((err: unknown) =>
        this.#o.warn?.("replayed flows, but the datapath's cached flows were not flushed", {
          bridge: this.#o.bridge,
          err: String(err),
        }),
      );
    }
    return outcome.added + outcome.deleted;
  }

  /**
   * Replays the wanted state (#installAll) once the port operations in flight have settled; until it
   * is done ADD and CHECK answer "not available". Retried every 500 ms while it fails and the switch
   * is connected.
   */
  #replay(why: string): void {
    if (!this.#started) return;
    this.#switchReady = false;
    clearTimeout(this.#replayRetry);
    const previous = this.#replaying ?? Promise.resolve();
    const generation = ++this.#replayGeneration;
    const run = async (): Promise<void> => {
      await previous;
      const flows = this.#flows;
      if (!this.#started || !flows?.connection.connected) return;
      while (this.#portOps > 0) await new Promise<void>((resolve) => (this.#portOpsSettled = resolve));
      const started = performance.now();
      await this.#removePending();
      const changed = await this.#installAll(flows);
      this.#counters.replays++;
      this.#counters.replayedFlows += changed;
      // A replay asked for meanwhile (the other connection came back during this one) runs next and
      // may find another state: until it is done, ADD and CHECK still answer "not available".
      this.#switchReady = flows.connection.connected && generation === this.#replayGeneration;
      this.#o.info?.('OVS switch state replayed', {
        bridge: this.#o.bridge,
        why,
        flowsChanged: changed,
        ms: Math.round(performance.now() - started),
      });
    };
    const replaying: Promise<void> = run()
      .catch((err: Error) => {
        this.#o.warn?.('OVS switch replay failed; retrying', {
          bridge: this.#o.bridge,
          why,
          error: err.message,
        });
        this.#replayRetry = setTimeout(() => {
          if (this.#flows?.connection.connected) this.#replay(why);
        }, 500);
        this.#replayRetry.unref();
      })
      .finally(() => {
        if (this.#replaying === replaying) this.#replaying = undefined;
      });
    this.#replaying = replaying;
  }

  /** Runs one port operation; a replay starts only once none is in flight. */
  async #portOp<T>(fn: () => Promise<T>): Promise<T> {
    this.#portOps++;
    try {
      return await fn();
    } finally {
      this.#portOps--;
      if (this.#portOps === 0) this.#portOpsSettled?.();
    }
  }

  /** The flow table, when the switch holds the wanted state; else "not available" (CNI 50), at once. */
  #readyFlows(): FlowTable {
    const flows = this.#flows;
    if (!this.#started || !flows) throw new DatapathError('OVS datapath not started');
    if (!this.#switchReady) {
      const why = flows.connection.connected ? 'its flows are being replayed' : 'it is not reachable';
      throw new NotAvailableError(`OVS bridge ${this.#o.bridge} is not ready (${why}): try again`);
    }
    return flows;
  }

  /** Removes the OVSDB rows of pods deleted while OVSDB was away (their veths are gone). */
  async #removePending(): Promise<void> {
    for (const name of [...this.#pendingRemovals]) {
      const vs = await this.#db();
      const row = await vs.port(name);
      if (row?.externalIds[EXT_ROLE] === ROLE_POD) await vs.removePort(name, row);
      this.#pendingRemovals.delete(name);
    }
  }

  /**
   * Equivalent to: `ovs-vsctl add-port BRIDGE HOSTVETH -- set Interface HOSTVETH ofport_request=N --
   * set Port HOSTVETH external_ids:...` and, at the same time, the pod's flows for port N (first
   * deleting any flow left with the pod's cookie), sent now: ovs-vswitchd opens the port (a few ms,
   * more with many ports: it re-reads every port's flags over netlink per port added) while ADD
   * configures the pod side. `attachPort` finishes it.
   */
  openPort(port: PodPort): void {
    const flows = this.#readyFlows();
    const opening = this.#portOp(() => this.#openPort(flows, port));
    opening.catch(() => {}); // reported by attachPort; the undo's detachPort waits for it
    this.#opening.set(port.hostIfname, opening);
  }

  /**
   * Waits for `openPort`'s work (or does it, when ADD did not call it), then `ip link set HOSTVETH up`.
   * The veth's carrier comes on only then, so the pod's first frames (DAD, MLD, the announcements)
   * already meet its flows (I5). A re-attach after a restart (`podMac` empty) adopts the recorded port.
   */
  async attachPort(port: PodPort): Promise<void> {
    const opening = this.#opening.get(port.hostIfname);
    if (opening) {
      this.#opening.delete(port.hostIfname);
      await opening;
    } else {
      const flows = this.#readyFlows();
      await this.#portOp(() => this.#openPort(flows, port));
    }
    await this.#hop?.redirect(port.hostIfname);
    this.#o.nl.setLinkUp(port.hostIfindex);
  }

  async #openPort(flows: FlowTable, port: PodPort): Promise<void> {
    // A removal queued by a DEL of this attachment during an OVSDB outage is this ADD's now: its
    // insert replaces the old row and its flows replace the old ones (same name, same cookie). Left
    // queued, the replay after the outage would remove the new row.
    this.#pendingRemovals.delete(port.hostIfname);
    const vs = await this.#db();
    if (port.podMac === '') {
      const row = await vs.port(port.hostIfname);
      if (row && parsePodExternalIds(row.externalIds)) return;
      throw new DatapathError(
        `cannot re-attach ${port.hostIfname}: no port of ${this.#o.bridge} records its MAC and addresses`,
      );
    }
    const vlan = port.vlan ?? 0;
    // Recorded as found now: a later change of the node's pod CIDRs does not make a plain pod a pool pod.
    const underlay = vlan !== 0 || onUnderlay(port.podIps, this.#cidrs);
    const record = {
      containerId: port.containerId,
      ifname: port.ifname,
      mac: port.podMac,
      ips: port.podIps,
      ...(port.pod ? { pod: port.pod } : {}),
      ...(vlan ? { vlan } : {}),
      underlay,
    };
    const cookie = podCookie(port.hostIfname);
    const program = (ofport: number) =>
      // Not a bundle: the port's link is down until below, so nothing meets a half-written set (I5).
      flows.apply({
        deleteCookies: [cookie],
        add: podFlows({ ofport, mac: port.podMac, ips: port.podIps, cookie, vlan, underlay }),
        atomic: false,
      });
    // The port's number is chosen here, so its flows go out while ovs-vswitchd opens the port.
    const ofport = this.#ofports.take(this.#o.bridge);
    const [added, programmed] = await Promise.allSettled([
      vs
        .addPort(port.hostIfname, { externalIds: podExternalIds(record), ofportRequest: ofport })
        .catch((err: unknown) => {
          this.#rowless.set(port.hostIfname, ofport); // the undo's detach frees it, after the flows
          throw err;
        })
        .then(() => vs.waitOfport(port.hostIfname, this.#portTimeoutMs)),
      program(ofport),
    ]);
    // Both settled before a failure is reported: the rollback's detach then finds the row and flows.
    if (added.status === 'rejected') throw added.reason;
    if (programmed.status === 'rejected') throw programmed.reason;
    const row = added.value;
    if (row.ofport !== ofport) {
      // A port podwire did not make held the number: the flows follow the number it got.
      this.#o.warn?.('OVS gave a pod port another OpenFlow number than asked for', {
        port: port.hostIfname,
        asked: ofport,
        got: row.ofport,
      });
      this.#ofports.mark(row.ofport);
      await program(row.ofport as number);
    }
    if (vlan) {
      // The node's untagged floods must not reach a pod of a VLAN; its VLAN's multicast flow does.
      await flows.setNoFlood(port.hostIfname);
      await this.#floods.sync(flows, vlan);
    } else if (underlay && this.#gateway?.uplinkOfport !== undefined) {
      // An untagged pool pod hears the underlay's multicast (bridging mode).
      await this.#floods.sync(flows, 0);
    }
  }

  /** The port's flows and row go: nothing of the pod passes the bridge any more. */
  isolatePort(hostIfname: string): Promise<void> {
    return this.detachPort(hostIfname);
  }

  /**
   * Removes the pod's flows and its port: a port number handed out again must never find flows of
   * the pod that had it before, so the number is free again only once both are gone. Equivalent to:
   * `ovs-ofctl del-flows BRIDGE cookie=C/-1; ovs-vsctl --if-exists del-port HOSTVETH`. Nothing to do when the port is gone. While the switch
   * is away the flows stay until the replay that precedes the next ADD, which drops them with the
   * row; while OVSDB is away the row's removal waits for it.
   */
  async detachPort(hostIfname: string): Promise<void> {
    const opening = this.#opening.get(hostIfname);
    if (opening) {
      // An ADD undone between openPort and attachPort: its row and flows are removed once they are in.
      this.#opening.delete(hostIfname);
      await opening.catch(() => {});
    }
    if (this.#replaying) await this.#replaying;
    await this.#portOp(() => this.#detachPort(hostIfname));
    await this.#hop?.remove(hostIfname);
  }

  async #detachPort(hostIfname: string): Promise<void> {
    const flows = this.#switchReady ? this.#flows : undefined;
    // While the switch is away the pod's flows stay until the replay that precedes the next ADD.
    const dropFlows = () =>
      flows &&
      this.#cookieDeletions.submit(podCookie(hostIfname)).catch((err: unknown) => {
        if (!(err instanceof NotAvailableError)) throw err; // the switch went away: the replay drops them
      });
    // OVSDB is away, and with it ovs-vswitchd's OpenFlow service (it serves OpenFlow only while it
    // holds its database lock; a flow mod would wait for the echo timeout): the replay after OVSDB's
    // return removes the row, then the flows.
    const away = () => this.#pendingRemovals.add(hostIfname);
    let vs: VswitchDb;
    try {
      vs = await this.#db(); // no round trip while connected
    } catch (err) {
      if (!ovsdbAway(err)) throw err;
      away();
      return;
    }
    // The flows first, sent while OVSDB is asked for the row: that isolates the pod, and their barrier
    // then never waits behind ovs-vswitchd reconfiguring for removed ports (~10 ms a port on the
    // userspace datapath; a burst of 100 DELs had one DEL wait a second). Both are batched with the
    // other DELs in flight. The port's number is podwire's to hand out (ofport_request), and it is
    // handed out again only once both are gone. (A port without a row has flows only after a failed
    // insert, below; deleting none of a cookie changes nothing.)
    const dropping = dropFlows();
    dropping?.catch(() => {}); // awaited on every path below
    let row: PortRow | undefined;
    try {
      row = await vs.port(hostIfname);
    } catch (err) {
      await dropping;
      if (!ovsdbAway(err)) throw err;
      away();
      return;
    }
    await dropping;
    if (!row || row.externalIds[EXT_ROLE] !== ROLE_POD) {
      const rowless = this.#rowless.get(hostIfname);
      if (rowless !== undefined && flows) {
        // The undo of an ADD whose insert failed after its flows went out: they went, then the number.
        // (While the switch is away the replay removes them, and frees the number with the others.)
        this.#rowless.delete(hostIfname);
        this.#ofports.release(rowless);
      }
      return;
    }
    try {
      await this.#portRemovals.submit(row);
    } catch (err) {
      if (!ovsdbAway(err)) throw err;
      away(); // lost during the removal: as above
      return;
    }
    // A multicast flow listing the port is rewritten without it before the number is free again: the
    // next ADD would get the number, and with it the pool's or VLAN's multicast. Should that fail,
    // the number stays taken until the next replay, which frees it with the others.
    const rec = parsePodExternalIds(row.externalIds);
    if (rec && flows && this.#switchReady) {
      if (rec.vlan) await this.#floods.sync(flows, rec.vlan);
      else if (this.#gateway?.uplinkOfport !== undefined && recordOnUnderlay(rec, this.#cidrs))
        await this.#floods.sync(flows, 0);
    }
    this.#ofports.release(row.ofport, row.ofportRequest);
  }

  async checkPort(hostIfname: string): Promise<void> {
    const flows = this.#readyFlows();
    await this.#portOp(async () =>
      checkPodPort(
        { nl: this.#o.nl, vs: await this.#db(), flows, bridge: this.#o.bridge, podCidrs: this.#cidrs },
        hostIfname,
      ),
    );
    await this.#hop?.check(hostIfname);
  }

  /**
   * Equivalent to: `ovs-vsctl set Interface GATEWAY mac=UPLINKMAC -- add-port BRIDGE UPLINK`, then the
   * pipeline again in one bundle, now with the node's addresses as the gateway's own (with the uplink's
   * MAC) and the uplink's flows (pipeline.ts). Only pipeline flows change: pods never see a gap. On
   * the userspace datapath the kernel's own stack stops receiving on the uplink (uplink-ingress.ts).
   */
  async attachUplink(uplink: UplinkPort): Promise<void> {
    const gw = this.#requireGateway();
    const vs = await this.#db();
    const mac = uplink.mac.toLowerCase();
    const before = gw.mac;
    try {
      // Before the uplink joins: the node-local pods' ARP never reaches the underlay (uplink-arp-guard.ts).
      await installUplinkArpGuard(this.#o.nft, uplink.ifname, this.#o.gateways, this.#o.warn);
      await setGatewayMac(vs, this.#o, mac, this.#portTimeoutMs);
      await vs.addPort(uplink.ifname, { externalIds: { [EXT_ROLE]: ROLE_UPLINK } });
      const row = await vs.waitOfport(uplink.ifname, this.#portTimeoutMs);
      // At once: FLOOD from a plain pod must not reach the underlay (pipeline.ts, decision 30).
      await this.#readyFlows().setNoFlood(uplink.ifname);
      if (this.#o.datapathType === 'netdev') await dropKernelIngress(this.#o.nft, uplink.ifname);
      this.#gateway = {
        ofport: gw.ofport,
        mac,
        ipv4s: [...this.#podGatewaysV4(), ...uplink.ips.filter((ip) => !ip.includes(':'))],
        uplinkOfport: row.ofport as number,
      };
      await this.#installPipeline();
    } catch (err) {
      // Half attached (e.g. the kernel told to ignore the uplink, but no flows for it) cuts the node
      // off: undo all of it, then report.
      await this.detachUplink({ ifname: uplink.ifname, index: uplink.index, targetMac: before }).catch(
        () => undefined,
      );
      throw err;
    }
  }

  /** Equivalent to: `ovs-vsctl --if-exists del-port UPLINK -- set Interface GATEWAY mac=TARGETMAC`. */
  async detachUplink(uplink: { ifname: string; index: number; targetMac: string }): Promise<void> {
    const gw = this.#requireGateway();
    const vs = await this.#db();
    // The kernel listens to the uplink again first: should removing the port fail, the node still
    // answers (twice, for a moment), where the other order would leave it deaf.
    if (this.#o.datapathType === 'netdev') await restoreKernelIngress(this.#o.nft);
    const row = await vs.port(uplink.ifname);
    if (row?.externalIds[EXT_ROLE] === ROLE_UPLINK) await vs.removePort(uplink.ifname, row);
    await removeUplinkArpGuard(this.#o.nft).catch(() => undefined); // not there when it could not be installed
    const mac = uplink.targetMac.toLowerCase();
    await setGatewayMac(vs, this.#o, mac, this.#portTimeoutMs);
    this.#gateway = { ofport: gw.ofport, mac, ipv4s: this.#podGatewaysV4() };
    await this.#installPipeline();
  }

  async ports(): Promise<string[]> {
    const vs = await this.#db();
    return (await vs.ports()).filter((r) => r.externalIds[EXT_ROLE] === ROLE_POD).map((r) => r.name);
  }

  /**
   * What each table refused: the packets of its drop flows (pipeline.ts), the priority-0 flow that
   * ends it and, in table 0, those for tagged frames, router solicitations, advertisements,
   * redirects and DHCP server messages, which the Linux bridge counts as CLASSIFIER too.
   */
  async dropCounters(): Promise<Array<{ guard: string; packets: number }>> {
    if (!this.#flows?.connection.connected) return []; // the switch is away: nothing to read
    const byTable = new Map<number, number>();
    for (const f of await this.#flows.dump(PIPELINE_COOKIE)) {
      if (f.instructions.length === 0)
        byTable.set(f.table, (byTable.get(f.table) ?? 0) + Number(f.packetCount));
    }
    return [...byTable].map(([table, packets]) => ({
      guard: TABLE_NAMES.get(table) ?? `table ${table}`,
      packets,
    }));
  }

  switchCounters(): { reconnects: Record<string, number>; replays: number; replayedFlows: number } {
    const c = this.#counters;
    return {
      reconnects: { openflow: c.openflowReconnects, ovsdb: this.#ovsdb.reconnects },
      replays: c.replays,
      replayedFlows: c.replayedFlows,
    };
  }

  status(): DatapathStatus {
    if (!this.#started) return { ready: false, reason: `OVS bridge ${this.#o.bridge} not set up yet` };
    const failure = this.#ovsdb.failure;
    if (failure) return { ready: false, reason: failure.message };
    if (!this.#switchReady) {
      const connected = this.#flows?.connection.connected;
      return {
        ready: false,
        reason: connected
          ? `OVS bridge ${this.#o.bridge}: replaying its flows after the switch came back`
          : `OVS bridge ${this.#o.bridge}: no OpenFlow connection to ${this.#openflowTarget}`,
      };
    }
    return { ready: true };
  }

  /** Closes the OVSDB connection; the bridge, ports and flows stay, so pods keep working. */
  /** One writer of the whole flow table at a time: the replay, or the policy backend's apply. */
  #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#tableLock.then(fn, fn);
    this.#tableLock = run.catch(() => undefined);
    return run;
  }

  /**
   * NetworkPolicy on this bridge (policy-ovs-backend.ts: tables 47-49), on the datapath's own
   * OpenFlow connection; made once, after start(). Every replay of the switch's state (a restarted
   * ovs-vswitchd) installs its flows as last applied, in the same bundle as the rest.
   */
  #purgeCache(): Promise<void> {
    return purgeDatapathCache({ socket: this.#o.unixctl, runDir: runDirOf(this.#o.ovsdb) });
  }

  policyBackend(): PolicyBackend {
    if (this.#policy) return this.#policy;
    const flows = this.#flows;
    if (!flows) throw new DatapathError('OVS datapath: policyBackend() before start()');
    const nodeIps = this.#nodeIps();
    this.#policy = new OvsPolicyBackend(
      flows,
      () => ({ gatewayOfport: this.#requireGateway().ofport, nodeIps }),
      { lock: (fn) => this.#exclusive(fn), flushCache: () => this.#purgeCache() },
    );
    return this.#policy;
  }

  async stop(): Promise<void> {
    this.#policy = undefined;
    this.#started = false;
    this.#switchReady = false;
    clearTimeout(this.#replayRetry);
    await this.#replaying;
    const flows = this.#flows;
    this.#flows = undefined;
    await Promise.all([this.#ovsdb.close(), flows?.close()]);
  }

  /** The gateway as the pipeline names it; `starting`: also while start() runs. */
  #requireGateway(starting = false): GatewayFlowsInput {
    if (!(this.#started || starting) || !this.#gateway) throw new DatapathError('OVS datapath not started');
    return this.#gateway;
  }

  /** The node's own addresses, as the policy flows let them reach every pod. */
  #nodeIps(): string[] {
    return this.#o.gateways.map((g) => g.address);
  }

  #podGatewaysV4(): string[] {
    return this.#o.gateways.filter((g) => g.family === 4).map((g) => g.address);
  }

  /**
   * Replaces the pipeline's own flows (not the pods') in one bundle, with the VLANs' multicast flows,
   * which name the uplink when there is one.
   */
  async #installPipeline(): Promise<void> {
    const gw = this.#requireGateway();
    const flows = this.#readyFlows();
    const vs = await this.#db();
    const floods = floodFlows(await vs.ports(), gw, this.#cidrs);
    await flows.apply({
      deleteCookies: [PIPELINE_COOKIE, UNDERLAY_FLOOD_COOKIE],
      add: [...pipelineFlows(gw), ...floods],
    });
  }

  #db(): Promise<VswitchDb> {
    return this.#ovsdb.db();
  }
}

/** OVSDB could not be reached, or the connection was lost before the answer: not the request's fault. */
function ovsdbAway(err: unknown): boolean {
  return err instanceof NotAvailableError || (err instanceof OvsdbError && err.error === 'connection');
}
