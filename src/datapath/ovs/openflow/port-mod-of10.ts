/**
 * The port's no-flood bit, which exists only in OpenFlow 1.0 (OFPPC_NO_FLOOD; 1.3 dropped it): OVS
 * honours it, but only an OpenFlow 1.0 PORT_MOD sets it and only 1.0's FEATURES_REPLY (its
 * ofp_phy_port list) reports it. So these helpers want an OpenflowConnection opened with
 * `version: OFP10_VERSION` (OpenFlow 1.0.0, 5.2.1 "Port Structures", 5.3.3 "Port Modification
 * Message").
 */
import { DatapathError, DecodeError } from '../../../base/errors.js';
import type { OpenflowConnection } from './connection.js';
import { OFP_SWITCH_FEATURES_BODY_LEN } from './features.js';
import { OFP10_VERSION, OFPT10 } from './header.js';

/** enum ofp_port_config (OpenFlow 1.0). */
export const OFPPC10 = {
  PORT_DOWN: 1 << 0,
  NO_STP: 1 << 1,
  NO_RECV: 1 << 2,
  NO_RECV_STP: 1 << 3,
  NO_FLOOD: 1 << 4,
  NO_FWD: 1 << 5,
  NO_PACKET_IN: 1 << 6,
} as const;
export const OFPPC_NO_FLOOD = OFPPC10.NO_FLOOD;

/** struct ofp_phy_port: 48 bytes. */
export const OFP10_PHY_PORT_LEN = 48;

export interface PhyPort10 {
  portNo: number;
  /** "aa:bb:cc:dd:ee:ff". */
  hwAddr: string;
  name: string;
  config: number;
  state: number;
}

function macBytes(mac: string): Buffer {
  const parts = mac.split(':');
  if (parts.length !== 6 || parts.some((p) => !/^[0-9a-fA-F]{2}$/.test(p))) {
    throw new DatapathError(`not a MAC address: ${mac}`);
  }
  return Buffer.from(parts.map((p) => Number.parseInt(p, 16)));
}

function macText(b: Buffer): string {
  return [...b].map((x) => x.toString(16).padStart(2, '0')).join(':');
}

/**
 * The body of an OpenFlow 1.0 PORT_MOD (ofp_port_mod after its header: port_no, hw_addr, config,
 * mask, advertise, pad[4]; 24 bytes). `hwAddr` must be the port's own (the switch checks it);
 * advertise 0 leaves the port's advertised features alone.
 */
export function encodePortMod10(p: { portNo: number; hwAddr: string; config: number; mask: number }): Buffer {
  const body = Buffer.alloc(24);
  body.writeUInt16BE(p.portNo, 0);
  macBytes(p.hwAddr).copy(body, 2);
  body.writeUInt32BE(p.config >>> 0, 8);
  body.writeUInt32BE(p.mask >>> 0, 12);
  body.writeUInt32BE(0, 16);
  return body;
}

/** The ports of an OpenFlow 1.0 FEATURES_REPLY body (after the 8-byte header). */
export function decodeFeaturesPorts10(body: Buffer): PhyPort10[] {
  const ports: PhyPort10[] = [];
  const list = body.subarray(OFP_SWITCH_FEATURES_BODY_LEN);
  if (body.length < OFP_SWITCH_FEATURES_BODY_LEN || list.length % OFP10_PHY_PORT_LEN !== 0) {
    throw new DecodeError(`OpenFlow 1.0 FEATURES_REPLY body of ${body.length} bytes is not 24 + 48 * ports`);
  }
  for (let off = 0; off < list.length; off += OFP10_PHY_PORT_LEN) {
    const name = list.subarray(off + 8, off + 24);
    const end = name.indexOf(0);
    ports.push({
      portNo: list.readUInt16BE(off),
      hwAddr: macText(list.subarray(off + 2, off + 8)),
      name: name.subarray(0, end < 0 ? 16 : end).toString('latin1'),
      config: list.readUInt32BE(off + 24),
      state: list.readUInt32BE(off + 28),
    });
  }
  return ports;
}

function require10(conn: OpenflowConnection): void {
  if (conn.version !== OFP10_VERSION) {
    throw new DatapathError(
      `the no-flood bit needs an OpenFlow 1.0 connection; ${conn.target} speaks 0x0${conn.version}`,
    );
  }
}

/** The switch's ports now. Equivalent to: `ovs-ofctl -O OpenFlow10 show SWITCH` (its port list). */
export async function ports10(conn: OpenflowConnection): Promise<PhyPort10[]> {
  require10(conn);
  return decodeFeaturesPorts10(await conn.request(OFPT10.FEATURES_REQUEST));
}

async function portNamed(conn: OpenflowConnection, portName: string): Promise<PhyPort10> {
  const port = (await ports10(conn)).find((p) => p.name === portName);
  if (!port) throw new DatapathError(`OpenFlow switch ${conn.target} has no port ${portName}`);
  return port;
}

/**
 * Sets (or with `on` false clears) the port's no-flood bit, then waits for a barrier.
 * Equivalent to: `ovs-ofctl -O OpenFlow10 mod-port SWITCH PORT no-flood` (or `flood`).
 */
export async function setNoFlood(conn: OpenflowConnection, portName: string, on = true): Promise<void> {
  const port = await portNamed(conn, portName);
  const body = encodePortMod10({
    portNo: port.portNo,
    hwAddr: port.hwAddr,
    config: on ? OFPPC_NO_FLOOD : 0,
    mask: OFPPC_NO_FLOOD,
  });
  await conn.transact([{ type: OFPT10.PORT_MOD, body }]);
}

/** Whether the port's no-flood bit is set. Equivalent to: `ovs-ofctl -O OpenFlow10 show SWITCH` (NO_FLOOD in its config). */
export async function noFlood(conn: OpenflowConnection, portName: string): Promise<boolean> {
  return ((await portNamed(conn, portName)).config & OFPPC_NO_FLOOD) !== 0;
}
