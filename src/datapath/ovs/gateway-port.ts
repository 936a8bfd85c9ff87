/**
 * The gateway's internal port of the OVS bridge: made with a fixed MAC (or adopted), and configured
 * in the node namespace as the pods' gateway. In bridging mode it takes the uplink's MAC and gives it
 * back (`setGatewayMac`).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { DatapathError } from '../../base/errors.js';
import { randomLocalMac } from '../../base/mac.js';
import type { Rtnetlink } from '../../kernel/netlink/rtnetlink.js';
import type { SysctlWriter } from '../../kernel/sysctl.js';
import type { GatewayAddress } from '../datapath.js';
import { configureGateway } from '../gateway.js';
import { EXT_ROLE, ROLE_GATEWAY } from './port-record.js';
import type { PortRow, VswitchDb } from './vswitch-db.js';

/** The datapath's settings a gateway port needs. */
export interface GatewayPortSettings {
  nl: Rtnetlink;
  sysctl: SysctlWriter;
  gateways: GatewayAddress[];
  mtu: number;
  bridge: string;
  /** Name of the gateway's internal port. */
  gateway: string;
}

/** Creates the gateway's internal port with a fixed MAC, or adopts it; returns its port and MAC. */
export async function ensureGatewayPort(
  vs: VswitchDb,
  o: GatewayPortSettings,
  timeoutMs: number,
): Promise<{ ofport: number; mac: string }> {
  const existing = await vs.port(o.gateway);
  if (!existing) {
    await vs.addPort(o.gateway, {
      type: 'internal',
      // Fixed in OVSDB so the gateway keeps its identity on the wire across restarts (I5).
      mac: randomLocalMac(),
      mtu: o.mtu,
      externalIds: { [EXT_ROLE]: ROLE_GATEWAY },
    });
  } else if (existing.type !== 'internal') {
    throw new DatapathError(
      `port ${o.gateway} of ${o.bridge} has type ${existing.type || 'system'}, not internal`,
    );
  } else if (!existing.mac && existing.macInUse) {
    await vs.updateInterface(o.gateway, { mac: existing.macInUse, mtu_request: o.mtu });
  } else {
    await vs.updateInterface(o.gateway, { mtu_request: o.mtu });
  }
  const row: PortRow = await vs.waitOfport(o.gateway, timeoutMs);
  const mac = (row.mac ?? row.macInUse)?.toLowerCase();
  if (!mac) throw new DatapathError(`gateway ${o.gateway} has no MAC address in OVSDB`);
  return { ofport: row.ofport as number, mac };
}

/**
 * Equivalent to: `ip addr add GW/LEN dev GATEWAY; ip link set GATEWAY up` plus the gateway sysctls.
 * The gateway must be in this namespace: ovs-vswitchd creates internal ports in its own.
 */
export function configureGatewayLink(o: GatewayPortSettings, mac: string): void {
  const { nl, gateway, gateways, sysctl, bridge } = o;
  const link = nl.linkByName(gateway);
  if (!link) {
    throw new DatapathError(
      `gateway ${gateway} of ${bridge} is not in the agent's network namespace (is ovs-vswitchd running in another one?)`,
    );
  }
  if (link.mac?.toLowerCase() !== mac) {
    throw new DatapathError(`gateway ${gateway} has MAC ${link.mac}, OVSDB says ${mac}`);
  }
  configureGateway(nl, sysctl, { index: link.index, name: gateway }, gateways);
}

/** Gives the gateway port `mac` in OVSDB and waits until its kernel interface has it. */
export async function setGatewayMac(
  vs: VswitchDb,
  o: GatewayPortSettings,
  mac: string,
  timeoutMs: number,
): Promise<void> {
  const { nl, gateway } = o;
  await vs.updateInterface(gateway, { mac });
  const deadline = performance.now() + timeoutMs;
  for (let delay = 1; nl.linkByName(gateway)?.mac?.toLowerCase() !== mac; delay = Math.min(delay * 2, 20)) {
    if (performance.now() > deadline)
      throw new DatapathError(`ovs-vswitchd did not give ${gateway} the MAC ${mac}`);
    await sleep(delay);
  }
}
