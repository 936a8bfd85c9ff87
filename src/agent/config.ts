/**
 * The agent's configuration file (YAML). Every key is checked at start: an unknown key or a bad value
 * stops the agent with a message naming the key.
 */
import { readFileSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { PodwireError } from '../cni/errors.js';
import { parseCidr } from '../ipam/cidr.js';

export interface AgentConfig {
  /** One or two pod CIDRs, at most one per family; the first address of each is the gateway. */
  podCIDRs: string[];
  datapath: 'linux-bridge';
  /** The bridge that holds the gateway addresses. */
  bridge: string;
  mtu: number;
  /** The unix socket the CNI relay connects to (mode 0600). */
  socket: string;
  /** Where IPAM state lives; must survive reboots of the agent. */
  stateDir: string;
  /** How many CNI calls on different attachments run at once. */
  maxParallel: number;
}

export const DEFAULT_CONFIG: Omit<AgentConfig, 'podCIDRs'> = {
  datapath: 'linux-bridge',
  bridge: 'podwire0',
  mtu: 1500,
  socket: '/run/podwire/cni.sock',
  stateDir: '/var/lib/podwire',
  maxParallel: 32,
};

const KEYS = new Set(['podCIDRs', 'datapath', 'bridge', 'mtu', 'socket', 'stateDir', 'maxParallel']);
const IFNAME = /^[A-Za-z0-9_.-]{1,15}$/;

function bad(key: string, why: string): PodwireError {
  return new PodwireError('ERR_INVALID_CONFIG', `agent config: ${key}: ${why}`);
}

export function parseAgentConfig(text: string): AgentConfig {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new PodwireError('ERR_DECODE', 'agent config: not valid YAML', { cause: err });
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    throw bad('(top level)', 'must be a mapping');
  const obj = raw as Record<string, unknown>;
  for (const key of Object.keys(obj)) if (!KEYS.has(key)) throw bad(key, 'unknown key');

  const cfg: AgentConfig = { ...DEFAULT_CONFIG, podCIDRs: [] };
  const cidrs = obj.podCIDRs;
  if (!Array.isArray(cidrs) || cidrs.length < 1 || cidrs.length > 2) {
    throw bad('podCIDRs', 'must be a list of one or two CIDRs');
  }
  const families = new Set<number>();
  for (const c of cidrs) {
    if (typeof c !== 'string') throw bad('podCIDRs', `${JSON.stringify(c)} is not a string`);
    let family: number;
    try {
      family = parseCidr(c).family;
    } catch (err) {
      throw bad('podCIDRs', `${c}: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (families.has(family)) throw bad('podCIDRs', `more than one IPv${family} CIDR`);
    families.add(family);
    cfg.podCIDRs.push(c);
  }
  if (obj.datapath !== undefined) {
    if (obj.datapath !== 'linux-bridge')
      throw bad('datapath', `${JSON.stringify(obj.datapath)} is not supported (linux-bridge)`);
    cfg.datapath = obj.datapath;
  }
  if (obj.bridge !== undefined) {
    if (typeof obj.bridge !== 'string' || !IFNAME.test(obj.bridge))
      throw bad('bridge', 'must be an interface name of 1-15 characters');
    cfg.bridge = obj.bridge;
  }
  if (obj.mtu !== undefined) {
    const min = families.has(6) ? 1280 : 576;
    if (!Number.isInteger(obj.mtu) || (obj.mtu as number) < min || (obj.mtu as number) > 65535) {
      throw bad('mtu', `must be an integer from ${min} to 65535`);
    }
    cfg.mtu = obj.mtu as number;
  }
  for (const key of ['socket', 'stateDir'] as const) {
    const v = obj[key];
    if (v === undefined) continue;
    if (typeof v !== 'string' || !isAbsolute(v)) throw bad(key, 'must be an absolute path');
    cfg[key] = v;
  }
  if (obj.maxParallel !== undefined) {
    if (
      !Number.isInteger(obj.maxParallel) ||
      (obj.maxParallel as number) < 1 ||
      (obj.maxParallel as number) > 1024
    ) {
      throw bad('maxParallel', 'must be an integer from 1 to 1024');
    }
    cfg.maxParallel = obj.maxParallel as number;
  }
  return cfg;
}

export function loadAgentConfig(path: string): AgentConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new PodwireError('ERR_INVALID_CONFIG', `agent config: cannot read ${path}`, { cause: err });
  }
  return parseAgentConfig(text);
}
