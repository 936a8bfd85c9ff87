/**
 * The agent's configuration file (YAML). Every key is checked at start: an unknown key or a bad value
 * stops the agent with a message naming the key.
 */
import { readFileSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { parse as parseYaml, YAMLParseError } from 'yaml';
import { didYouMean } from '../base/did-you-mean.js';
import { DecodeError, InvalidConfigError, type PodwireError } from '../base/errors.js';
import { isPrefix, parsePrefix } from '../base/ip.js';
import { parseCidr } from '../ipam/cidr.js';
import { CLUSTER_KEYS, type ClusterSettings, parseClusterSettings } from './cluster-config.js';
import { controlSocketPath } from './ops/control-server.js';
import { DEFAULT_HEALTH_ADDRESS } from './ops/health-server.js';
import type { BridgingSettings } from './startup/bridging.js';
import { UNIX_PATH_MAX } from './unix-listen.js';

export interface AgentConfig {
  /** One or two pod CIDRs, at most one per family; the first address of each is the gateway. */
  podCIDRs: string[];
  datapath: 'linux-bridge' | 'ovs';
  /** The bridge: a Linux bridge holding the gateway addresses, or the OVS bridge. */
  bridge: string;
  /** ovs: the internal port that holds the gateway addresses. */
  gateway: string;
  /** ovs: the OVSDB socket, `unix:PATH`; the bridge's OpenFlow socket is `BRIDGE.mgmt` beside it. */
  ovsdb: string;
  /** ovs: the bridge's datapath type; `netdev` is the userspace datapath (no kernel module needed). */
  ovsDatapathType: 'system' | 'netdev';
  /**
   * ovs: ovs-vswitchd's control socket (an absolute path), to flush its datapath flow cache after a
   * NetworkPolicy change; by default `ovs-vswitchd.ctl` or `ovs-vswitchd.PID.ctl` in the OVSDB
   * socket's directory (decision 52).
   */
  ovsUnixctl?: string;
  mtu: number;
  /** The unix socket the CNI relay connects to (mode 0600). */
  socket: string;
  /** Where IPAM state lives; must survive reboots of the agent. */
  stateDir: string;
  /** How many CNI calls on different attachments run at once. */
  maxParallel: number;
  /** Cluster mode (store, CIDR pool, node identity, traffic mode); absent on a single node. */
  cluster?: ClusterSettings;
  /** The Prometheus endpoint, "host:port"; off when absent. */
  metricsAddress?: string;
  /** HOST:PORT of /livez and /readyz; undefined: off. */
  healthAddress?: string;
  /** Bridging mode: the uplink joins the pod bridge and the node's identity moves to the bridge interface. */
  bridging?: BridgingSettings;
  /** linux-bridge: the pods' identity guards (decision 17); `off` only for kernels without nf_tables' bridge family. */
  podGuards: 'on' | 'off';
  /**
   * Egress masquerade (decision 20): packets from this node's pod CIDRs to anything outside the
   * cluster's pod networks and `noMasqueradeCIDRs` leave with the node's address.
   */
  egressMasquerade: boolean;
  /** Destinations that keep the pod's source address besides the cluster's pod networks. */
  noMasqueradeCIDRs: string[];
}

export const DEFAULT_CONFIG: Omit<AgentConfig, 'podCIDRs'> = {
  datapath: 'linux-bridge',
  bridge: 'podwire0',
  gateway: 'podwire-gw0',
  ovsdb: 'unix:/run/openvswitch/db.sock',
  ovsDatapathType: 'system',
  mtu: 1500,
  socket: '/run/podwire/cni.sock',
  stateDir: '/var/lib/podwire',
  maxParallel: 128,
  podGuards: 'on',
  healthAddress: DEFAULT_HEALTH_ADDRESS,
  egressMasquerade: true,
  noMasqueradeCIDRs: [],
};

/** The bridge of `datapath: ovs` when the config names none. */
export const DEFAULT_OVS_BRIDGE = 'br-podwire';

export const CONFIG_KEYS: ReadonlySet<string> = new Set([
  'podCIDRs',
  'datapath',
  'bridge',
  'gateway',
  'ovsdb',
  'ovsDatapathType',
  'ovsUnixctl',
  'mtu',
  'socket',
  'stateDir',
  'maxParallel',
  'metricsAddress',
  'healthAddress',
  'bridging',
  'podGuards',
  'egressMasquerade',
  'noMasqueradeCIDRs',
  ...CLUSTER_KEYS,
]);
/** Keys that mean something only to the OVS datapath. */
const OVS_KEYS = ['gateway', 'ovsdb', 'ovsDatapathType', 'ovsUnixctl'] as const;
const IFNAME = /^[A-Za-z0-9_.-]{1,15}$/;

function bad(key: string, why: string): PodwireError {
  return new InvalidConfigError(`agent config: ${key}: ${why}`);
}

export function parseAgentConfig(text: string): AgentConfig {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new DecodeError(`agent config: not valid YAML: ${yamlWhere(err)}`, { cause: err });
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    throw bad('(top level)', 'must be a mapping');
  const obj = raw as Record<string, unknown>;
  for (const key of Object.keys(obj))
    if (!CONFIG_KEYS.has(key)) throw bad(key, `unknown key${didYouMean(key, CONFIG_KEYS)}`);

  const cfg: AgentConfig = { ...DEFAULT_CONFIG, podCIDRs: [] };
  const cluster = parseClusterSettings(obj);
  if (cluster) cfg.cluster = cluster;
  // In cluster mode the node's CIDRs may come from the store (leased, or the static file).
  const cidrs = obj.podCIDRs ?? (cluster ? [] : undefined);
  if (cidrs === undefined)
    throw bad('podCIDRs', 'missing: a list of one or two CIDRs (required on a single node)');
  if (!Array.isArray(cidrs) || cidrs.length > 2 || (cidrs.length < 1 && !cluster)) {
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
    if (obj.datapath !== 'linux-bridge' && obj.datapath !== 'ovs')
      throw bad('datapath', `${JSON.stringify(obj.datapath)} is not supported (linux-bridge, ovs)`);
    cfg.datapath = obj.datapath;
  }
  if (cfg.datapath === 'ovs') cfg.bridge = DEFAULT_OVS_BRIDGE;
  for (const key of ['bridge', 'gateway'] as const) {
    const v = obj[key];
    if (v === undefined) continue;
    if (typeof v !== 'string' || !IFNAME.test(v))
      throw bad(key, 'must be an interface name of 1-15 characters');
    cfg[key] = v;
  }
  for (const key of OVS_KEYS) {
    if (obj[key] !== undefined && cfg.datapath !== 'ovs')
      throw bad(key, 'only meaningful with datapath: ovs');
  }
  if (cfg.datapath === 'ovs' && cfg.gateway === cfg.bridge) throw bad('gateway', 'must differ from bridge');
  if (obj.ovsdb !== undefined) {
    const v = obj.ovsdb;
    if (typeof v !== 'string' || !v.startsWith('unix:') || !isAbsolute(v.slice(5)))
      throw bad('ovsdb', 'must be unix:ABSOLUTE-PATH (only unix sockets are supported)');
    cfg.ovsdb = v;
  }
  if (obj.ovsUnixctl !== undefined) {
    const v = obj.ovsUnixctl;
    if (typeof v !== 'string' || !isAbsolute(v)) throw bad('ovsUnixctl', 'must be an absolute path');
    cfg.ovsUnixctl = v;
  }
  if (obj.ovsDatapathType !== undefined) {
    if (obj.ovsDatapathType !== 'system' && obj.ovsDatapathType !== 'netdev')
      throw bad('ovsDatapathType', `${JSON.stringify(obj.ovsDatapathType)} is not one of system, netdev`);
    cfg.ovsDatapathType = obj.ovsDatapathType;
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
  // The relay's socket and control.sock beside it must each fit a struct sockaddr_un.
  for (const path of [cfg.socket, controlSocketPath(cfg.socket)]) {
    const n = Buffer.byteLength(path);
    if (n > UNIX_PATH_MAX)
      throw bad('socket', `${path} is ${n} bytes; a unix socket path holds at most ${UNIX_PATH_MAX}`);
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
  if (obj.metricsAddress !== undefined) {
    const v = obj.metricsAddress;
    if (typeof v !== 'string' || !/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/.test(v)) {
      throw bad('metricsAddress', 'must be HOST:PORT, e.g. 127.0.0.1:9105 or [::1]:9105');
    }
    cfg.metricsAddress = v;
  }
  if (obj.healthAddress !== undefined) {
    const v = obj.healthAddress;
    if (v === 'off') delete cfg.healthAddress;
    else if (typeof v !== 'string' || !/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/.test(v)) {
      throw bad('healthAddress', 'must be HOST:PORT, e.g. 127.0.0.1:9109, or off');
    } else cfg.healthAddress = v;
  }
  if (obj.bridging !== undefined) {
    const b = obj.bridging as Record<string, unknown> | null;
    if (b === null || typeof b !== 'object' || Array.isArray(b))
      throw bad('bridging', 'must be {uplink: IFNAME}');
    for (const k of Object.keys(b))
      if (k !== 'uplink') throw bad(`bridging.${k}`, `unknown key${didYouMean(k, ['uplink'])}`);
    if (typeof b.uplink !== 'string' || !IFNAME.test(b.uplink))
      throw bad('bridging.uplink', 'must be an interface name of 1-15 characters');
    if (b.uplink === cfg.bridge || b.uplink === cfg.gateway)
      throw bad('bridging.uplink', 'must differ from the bridge and the gateway');
    if (cfg.cluster && cfg.cluster.uplink !== b.uplink)
      throw bad(
        'bridging.uplink',
        `must be the cluster uplink (${cfg.cluster.uplink}): the node's underlay IP moves with it`,
      );
    cfg.bridging = { uplink: b.uplink };
  }
  if (obj.podGuards !== undefined) {
    // YAML 1.1 readers turn a bare off into false; both spellings mean the same.
    const v = obj.podGuards === false ? 'off' : obj.podGuards === true ? 'on' : obj.podGuards;
    if (v !== 'on' && v !== 'off')
      throw bad('podGuards', `${JSON.stringify(obj.podGuards)} is not one of on, off`);
    if (v === 'off' && cfg.datapath !== 'linux-bridge')
      throw bad('podGuards', 'only the Linux bridge can run without its guards (the OVS pipeline is them)');
    cfg.podGuards = v;
  }
  if (obj.egressMasquerade !== undefined) {
    if (typeof obj.egressMasquerade !== 'boolean') throw bad('egressMasquerade', 'must be true or false');
    cfg.egressMasquerade = obj.egressMasquerade;
  }
  if (obj.noMasqueradeCIDRs !== undefined) {
    if (!cfg.egressMasquerade) throw bad('noMasqueradeCIDRs', 'only meaningful with egressMasquerade: true');
    cfg.noMasqueradeCIDRs = parseCidrList('noMasqueradeCIDRs', obj.noMasqueradeCIDRs);
  }
  return cfg;
}

/** A list of CIDRs (either family, host bits zero), canonical. */
function parseCidrList(key: string, v: unknown): string[] {
  if (!Array.isArray(v)) throw bad(key, 'must be a list of CIDRs');
  return v.map((c) => {
    if (typeof c !== 'string') throw bad(key, `${JSON.stringify(c)} is not a string`);
    const p = parsePrefix(c);
    if (!isPrefix(p)) throw bad(key, `${c}: ${p.error}`);
    return p.text;
  });
}

/** "line L, column C: what", from the YAML parser's error. */
function yamlWhere(err: unknown): string {
  if (!(err instanceof YAMLParseError)) return err instanceof Error ? err.message : String(err);
  const what = err.message.split(' at line ')[0] ?? err.message;
  const at = err.linePos?.[0];
  return at ? `line ${at.line}, column ${at.col}: ${what}` : what;
}

export function loadAgentConfig(path: string): AgentConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new InvalidConfigError(`agent config: cannot read ${path}`, { cause: err });
  }
  return parseAgentConfig(text);
}
