/**
 * A suite that runs on OVS only where Open vSwitch is installed says so when it is not: a skipped
 * test whose reason names what is missing, instead of an OVS half that silently disappears.
 */
import { test } from 'node:test';
import { ovsAvailable } from '../../bed/ovs.js';

export const OVS_MISSING = 'Open vSwitch is not installed (ovs-vswitchd, ovsdb-server, vswitch.ovsschema)';

/** Registers one skipped test `<what>, ovs` with the reason when OVS is missing; else nothing. */
export function reportOvsSkip(what: string): void {
  if (!ovsAvailable()) test(`${what}, ovs`, { skip: OVS_MISSING }, () => {});
}
