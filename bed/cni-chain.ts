/**
 * A network configuration list (conflist) run the way libcni runs one (containernetworking/cni,
 * libcni/api.go), so that podwire can be tested chained with other plugins without a runtime:
 *
 * - ADD: each plugin in order; each gets the previous plugin's result as `prevResult` (the first gets
 *   none); the last result is the list's result and is cached for CHECK and DEL.
 * - CHECK (0.4.0 and later): each plugin in order, each with the cached final result as `prevResult`.
 * - DEL: each plugin in reverse order, with the cached result as `prevResult` from 0.4.0 on; the cache
 *   entry goes once every plugin succeeded.
 * - Every plugin's configuration is its conflist entry with the list's `name` and `cniVersion`
 *   injected, and `runtimeConfig` holding exactly the capability arguments the runtime passed for
 *   the capabilities the entry declares (`capabilities: {portMappings: true}`), as libcni's
 *   injectRuntimeConfig does; CNI_ARGS is `K=V;K=V`, CNI_PATH the plugin directories joined by `:`.
 *
 * Plugins are executed inside the network namespace the runtime would run in (the test's node
 * namespace, `ip netns exec`), so that what they change there (iptables rules, qdiscs, sysctls) stays
 * in the bed (I7). The result cache is this object's (libcni keeps it in /var/lib/cni).
 */
import { accessSync, constants } from 'node:fs';
import { join } from 'node:path';
import { run } from './exec.js';

export interface ConfList {
  cniVersion: string;
  name: string;
  plugins: Array<Record<string, unknown> & { type: string }>;
}

/** What a runtime knows about one attachment (libcni's RuntimeConf). */
export interface RuntimeConf {
  containerId: string;
  /** The pod's netns path (CNI_NETNS). */
  netns: string;
  ifname: string;
  /** CNI_ARGS, in order. */
  args?: Array<[string, string]>;
  /** Capability arguments by capability name, e.g. `portMappings`, `bandwidth`. */
  capabilityArgs?: Record<string, unknown>;
}

export type CniJson = Record<string, unknown>;

/** One plugin's failure: which plugin, which command, its exit code and its CNI error object. */
export class PluginError extends Error {
  constructor(
    readonly plugin: string,
    readonly command: string,
    readonly exitCode: number,
    readonly error: CniJson | undefined,
    stderr: string,
  ) {
    super(
      `${plugin} ${command} exited ${exitCode}: ${error === undefined ? '(no error object)' : JSON.stringify(error)}${stderr.trim() === '' ? '' : ` stderr: ${stderr.trim()}`}`,
    );
  }
}

export interface ChainOptions {
  /** Directories searched, in order, for a plugin's executable (CNI_PATH). */
  pluginDirs: string[];
  /** The network namespace (a name under /run/netns) the plugins run in: the runtime's. */
  runtimeNetns: string;
}

/** Versions that have CHECK and cache the result for DEL (libcni: GreaterThanOrEqualTo "0.4.0"). */
function atLeast040(version: string): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return major > 0 || minor >= 4;
}

export class CniChain {
  readonly #cache = new Map<string, CniJson>();

  constructor(
    readonly list: ConfList,
    readonly options: ChainOptions,
  ) {}

  /** Runs ADD through the list; returns (and caches) the final result. */
  async add(rt: RuntimeConf): Promise<CniJson> {
    let prev: CniJson | undefined;
    for (const plugin of this.list.plugins) {
      const out = await this.#exec('ADD', plugin, rt, prev);
      if (out === undefined) throw new PluginError(plugin.type, 'ADD', 0, undefined, 'no result printed');
      prev = out;
    }
    if (prev === undefined) throw new Error(`conflist ${this.list.name} has no plugins`);
    this.#cache.set(this.#key(rt), prev);
    return prev;
  }

  /** Runs CHECK through the list with the cached result; throws the first plugin's failure. */
  async check(rt: RuntimeConf): Promise<void> {
    if (!atLeast040(this.list.cniVersion)) {
      throw new Error(`CHECK needs cniVersion 0.4.0 or later; the conflist says ${this.list.cniVersion}`);
    }
    const cached = this.#cache.get(this.#key(rt));
    if (cached === undefined) throw new Error(`no cached result for ${rt.containerId}/${rt.ifname}`);
    for (const plugin of this.list.plugins) await this.#exec('CHECK', plugin, rt, cached);
  }

  /**
   * CHECK of one plugin of the list, with the cached result, exactly as `check` would run it: for a
   * test to reach the plugins after one that fails CHECK for reasons of its own.
   */
  async checkPlugin(type: string, rt: RuntimeConf): Promise<void> {
    const plugin = this.list.plugins.find((p) => p.type === type);
    if (plugin === undefined) throw new Error(`conflist ${this.list.name} has no plugin ${type}`);
    const cached = this.#cache.get(this.#key(rt));
    if (cached === undefined) throw new Error(`no cached result for ${rt.containerId}/${rt.ifname}`);
    await this.#exec('CHECK', plugin, rt, cached);
  }

  /** Runs DEL through the list in reverse; the cached result goes once every plugin succeeded. */
  async del(rt: RuntimeConf): Promise<void> {
    const cached = atLeast040(this.list.cniVersion) ? this.#cache.get(this.#key(rt)) : undefined;
    for (const plugin of [...this.list.plugins].reverse()) await this.#exec('DEL', plugin, rt, cached);
    this.#cache.delete(this.#key(rt));
  }

  /** The result cached for `rt` by ADD, if any. */
  cachedResult(rt: RuntimeConf): CniJson | undefined {
    return this.#cache.get(this.#key(rt));
  }

  /** The configuration one plugin reads on stdin (libcni's buildOneConfig). */
  pluginConfig(plugin: ConfList['plugins'][number], rt: RuntimeConf, prev: CniJson | undefined): CniJson {
    const conf: CniJson = { ...plugin, name: this.list.name, cniVersion: this.list.cniVersion };
    if (prev !== undefined) conf.prevResult = prev;
    const capabilities = (plugin.capabilities ?? {}) as Record<string, unknown>;
    const runtimeConfig: CniJson = {};
    for (const [capability, enabled] of Object.entries(capabilities)) {
      if (enabled !== true) continue;
      const value = rt.capabilityArgs?.[capability];
      if (value !== undefined) runtimeConfig[capability] = value;
    }
    if (Object.keys(runtimeConfig).length > 0) conf.runtimeConfig = runtimeConfig;
    return conf;
  }

  #key(rt: RuntimeConf): string {
    return `${this.list.name}-${rt.containerId}-${rt.ifname}`;
  }

  /** libcni's FindInPath: the first directory holding an executable of that name. */
  #find(type: string): string {
    for (const dir of this.options.pluginDirs) {
      const path = join(dir, type);
      try {
        accessSync(path, constants.X_OK);
        return path;
      } catch {
        // not in this directory: try the next, as FindInPath does
      }
    }
    throw new Error(`failed to find plugin "${type}" in path [${this.options.pluginDirs.join(' ')}]`);
  }

  async #exec(
    command: 'ADD' | 'CHECK' | 'DEL',
    plugin: ConfList['plugins'][number],
    rt: RuntimeConf,
    prev: CniJson | undefined,
  ): Promise<CniJson | undefined> {
    const path = this.#find(plugin.type);
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      CNI_COMMAND: command,
      CNI_CONTAINERID: rt.containerId,
      CNI_NETNS: rt.netns,
      CNI_IFNAME: rt.ifname,
      CNI_ARGS: (rt.args ?? []).map(([k, v]) => `${k}=${v}`).join(';'),
      CNI_PATH: this.options.pluginDirs.join(':'),
    };
    const stdin = JSON.stringify(this.pluginConfig(plugin, rt, prev));
    const r = await run('ip', ['netns', 'exec', this.options.runtimeNetns, path], {
      env,
      input: stdin,
      timeoutMs: 30_000,
    });
    let json: CniJson | undefined;
    try {
      json = r.stdout.trim() === '' ? undefined : (JSON.parse(r.stdout) as CniJson);
    } catch {
      json = undefined; // not JSON: reported below as a failure without an error object
    }
    if (r.code !== 0) throw new PluginError(plugin.type, command, r.code, json, r.stderr);
    if (r.stdout.trim() !== '' && json === undefined) {
      throw new PluginError(plugin.type, command, r.code, undefined, `stdout is not JSON: ${r.stdout}`);
    }
    return json;
  }
}
