/** A valid plugin configuration per version and command, for the parseNetConf tests. */

import type { CniCommand } from '../../src/cni/types.js';
import { compareVersions } from '../../src/cni/versions.js';

export type Command = Exclude<CniCommand, 'VERSION'>;

export const PREV_1X = {
  cniVersion: '1.0.0',
  interfaces: [{ name: 'eth0', mac: '0a:58:0a:f4:00:05', sandbox: '/var/run/netns/p' }],
  ips: [{ address: '10.244.0.5/24', gateway: '10.244.0.1', interface: 0 }],
  routes: [{ dst: '0.0.0.0/0' }],
  dns: {},
};

/** A valid configuration for `command` in `version`, with `extra` merged over it. */
export function conf(version: string, command: Command, extra: Record<string, unknown> = {}): string {
  const base: Record<string, unknown> = { cniVersion: version, name: 'podnet', type: 'podwire' };
  if (command === 'CHECK') base.prevResult = PREV_1X;
  if (command === 'GC') base['cni.dev/valid-attachments'] = [{ containerID: 'abc', ifname: 'eth0' }];
  for (const [key, value] of Object.entries(extra)) {
    if (value === undefined) delete base[key];
    else base[key] = value;
  }
  return JSON.stringify(base);
}

/** The commands `version` allows. */
export function commandsOf(version: string): Command[] {
  const out: Command[] = ['ADD', 'DEL'];
  if (compareVersions(version, '0.4.0') >= 0) out.push('CHECK');
  if (compareVersions(version, '1.1.0') >= 0) out.push('GC', 'STATUS');
  return out;
}
