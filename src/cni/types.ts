/**
 * The CNI data types podwire works with, in the 1.x shape (SPEC.md sections 2 and 5). Older wire
 * formats are converted at the edges by `result.ts`; nothing inside the agent sees them.
 */

export type CniCommand = 'ADD' | 'DEL' | 'CHECK' | 'VERSION' | 'GC' | 'STATUS';

export const CNI_COMMANDS: readonly CniCommand[] = ['ADD', 'DEL', 'CHECK', 'VERSION', 'GC', 'STATUS'];

interface CniEnvCommon {
  /** CNI_ARGS, split into its `K=V` pairs; a later duplicate key wins, as in libcni. */
  args: ReadonlyMap<string, string>;
  /** CNI_PATH split on ':', empty entries dropped; empty when the variable is absent. */
  path: string[];
}

/** ADD and CHECK: every attachment parameter is present. */
export interface CniAttachmentEnv extends CniEnvCommon {
  command: 'ADD' | 'CHECK';
  containerId: string;
  /** Absolute path of the pod's network namespace. */
  netns: string;
  ifname: string;
}

/** DEL: the netns may be gone already, so CNI_NETNS is optional (SPEC.md "DEL"). */
export interface CniDelEnv extends CniEnvCommon {
  command: 'DEL';
  containerId: string;
  netns: string | undefined;
  ifname: string;
}

/** VERSION, GC and STATUS concern the plugin or the network, not one attachment. */
export interface CniNetworkEnv extends CniEnvCommon {
  command: 'VERSION' | 'GC' | 'STATUS';
  containerId: undefined;
  netns: undefined;
  ifname: undefined;
}

/** The validated CNI_* environment; narrow on `command` to get the attachment fields as strings. */
export type CniEnv = CniAttachmentEnv | CniDelEnv | CniNetworkEnv;

/** One (container, interface) pair: the key of everything podwire stores per attachment. */
export interface Attachment {
  containerId: string;
  ifname: string;
}

export interface CniInterface {
  name: string;
  /** Absent only in results from other plugins that have no L2 address to report. */
  mac?: string;
  /** 1.1.0 */
  mtu?: number;
  /** The netns path for interfaces inside the pod; absent for host-side interfaces. */
  sandbox?: string;
  /** 1.1.0 */
  socketPath?: string;
  /** 1.1.0 */
  pciID?: string;
}

export interface CniIpConfig {
  /** Address with prefix length, e.g. `10.0.0.5/24` or `fd00::5/64`. */
  address: string;
  gateway?: string;
  /** Index into `CniResult.interfaces`; invariant: < interfaces.length. */
  interface?: number;
}

export interface CniRoute {
  /** Destination in CIDR form. */
  dst: string;
  gw?: string;
  /** 1.1.0 */
  mtu?: number;
  /** 1.1.0 */
  advmss?: number;
  /** 1.1.0 */
  priority?: number;
  /** 1.1.0 */
  table?: number;
  /** 1.1.0 */
  scope?: number;
}

/** A route of podwire's `routes` configuration key. */
export interface ConfRoute {
  /** Canonical prefix text, host bits zero. */
  dst: string;
  /** Canonical address text; absent: the pod's gateway of the route's family. */
  gw?: string;
}

export interface CniDns {
  nameservers?: string[];
  domain?: string;
  search?: string[];
  options?: string[];
}

/** The ADD result, version-independent (1.1.0 field set); `formatResult` writes a given version. */
export interface CniResult {
  interfaces: CniInterface[];
  ips: CniIpConfig[];
  routes: CniRoute[];
  dns: CniDns;
}

/** A validated plugin configuration (SPEC.md "Plugin configuration objects") as seen on stdin. */
export interface NetConf {
  cniVersion: string;
  name: string;
  type: string;
  /** podwire's own key: the agent's unix socket, absolute. */
  socket?: string;
  /** The previous plugin's (or the cached ADD) result, converted to the 1.x shape. */
  prevResult?: CniResult;
  /** GC only (`cni.dev/valid-attachments`): the attachments that must be kept. */
  validAttachments?: Attachment[];
  runtimeConfig?: Record<string, unknown>;
  args?: Record<string, unknown>;
  capabilities?: Record<string, boolean>;
  ipam?: Record<string, unknown>;
  dns?: CniDns;
  /**
   * podwire's own key `defaultRoute` (absent: true): whether ADD gives the pod interface a default
   * route per family via the pod's gateway. A secondary network (Multus `net1`, beside another CNI
   * that owns `eth0` and the default route) sets it false and lists its `routes` instead.
   */
  defaultRoute?: boolean;
  /**
   * podwire's own key `routes`: more routes on the pod interface, `dst` canonical, each via `gw` when
   * given, else via the pod's gateway of its family; reported in the ADD result and checked by CHECK.
   */
  routes?: ConfRoute[];
  /** The whole decoded object, for plugin-specific keys (bridge, mtu, ...); never mutated. */
  raw: Readonly<Record<string, unknown>>;
}
