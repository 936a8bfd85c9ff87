#!/usr/bin/env node
/**
 * The DaemonSet's init container: renders this node's agent configuration and installs the CNI plugin
 * on the host. In order, each step only after the previous one succeeded:
 *
 *   1. agent.yaml from the ConfigMap, with podCIDRs replaced by the Node's spec.podCIDRs (mode `node`)
 *      or kept (mode `config`), checked with the agent's own parser, written for the agent container;
 *   2. the conflist checked with the CNI layer's parser, its socket compared with the agent's; the
 *      reference bandwidth plugin refused (podwire shapes bandwidth itself, decision 42); every other
 *      plugin it chains (portmap) must be in the image's plugin directory and must speak the
 *      conflist's cniVersion (asked with CNI_COMMAND=VERSION);
 *   3. the relay installed as CNI_BIN_DIR/podwire, and the chained plugins as CNI_BIN_DIR/TYPE;
 *   4. the conflist installed as CNI_NET_DIR/10-podwire.conflist, last: a runtime takes the network
 *      as ready once the conflist exists, so the plugins it names must already be there. A warning
 *      names every other CNI configuration in CNI_NET_DIR that sorts before it: runtimes use the
 *      first file (libcni's ConfFiles: .conf, .conflist and .json, by name), which is then not podwire.
 *
 * Every file is written beside its target and renamed over it: a runtime executing the old relay, or
 * reading the conflist, never sees a half-written file (and overwriting a running binary fails with
 * ETXTBSY). Any failure exits 1 with one JSON line saying why; the kubelet restarts the container.
 *
 * Environment (defaults are the DaemonSet's paths):
 *   NODE_NAME                    this node (downward API, spec.nodeName); needed in mode `node`;
 *                                with a cluster: section, the agent's nodeName unless the ConfigMap sets one
 *   PODWIRE_POD_CIDRS            `node` (default) or `config`
 *   PODWIRE_UPLINK               `config` (default): `uplink` as the ConfigMap has it; `node`:
 *                                the interface that holds this Node's InternalIP (status.addresses),
 *                                so that nodes whose uplinks are named differently share one ConfigMap
 *   PODWIRE_CONFIG_IN            the ConfigMap's directory            /etc/podwire-config
 *   PODWIRE_CONFIG_OUT           the agent's configuration directory  /etc/podwire
 *   CNI_BIN_DIR, CNI_NET_DIR     the host's, as mounted               /host/opt/cni/bin, /host/etc/cni/net.d
 *   PODWIRE_RELAY                the relay in the image               /opt/podwire/bin/podwire-cni
 *   PODWIRE_PLUGIN_DIR           the reference plugins in the image   /opt/podwire/cni-plugins
 *   PODWIRE_PLUGINS              `replace` (default): the image's build of each chained plugin
 *                                replaces the host's; `keep`: a plugin already in CNI_BIN_DIR stays
 *                                (the host's own build, e.g. where glibc is older than the image's
 *                                plugins need), only missing ones are installed
 *   PODWIRE_API_SERVER           the API's base URL; default https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT
 *   PODWIRE_SERVICE_ACCOUNT_DIR  token and ca.crt                     /var/run/secrets/kubernetes.io/serviceaccount
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { networkInterfaces } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { parseDocument } from 'yaml';
import { DEFAULT_CONFIG, parseAgentConfig } from '../dist/src/agent/config.js';
import { parseNetConf } from '../dist/src/cni/config.js';

const CONFLIST = '10-podwire.conflist';
const API_TIMEOUT_MS = 10_000;
const VERSION_TIMEOUT_MS = 10_000;

const env = (name, fallback) => process.env[name] || fallback;

function log(level, msg, fields = {}) {
  process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields })}\n`);
}

class InstallError extends Error {}

/** `write`s a file beside `target` and renames it over: readers see the old file or the new one. */
function replaceFile(target, write) {
  const tmp = join(dirname(target), `.${basename(target)}.tmp`);
  write(tmp);
  renameSync(tmp, target);
}

/** GET `path` from the API server as JSON, with the service account's token. */
function getJson(path) {
  const saDir = env('PODWIRE_SERVICE_ACCOUNT_DIR', '/var/run/secrets/kubernetes.io/serviceaccount');
  const host = process.env.KUBERNETES_SERVICE_HOST;
  const port = process.env.KUBERNETES_SERVICE_PORT;
  const base =
    process.env.PODWIRE_API_SERVER ||
    (host && port ? `https://${host.includes(':') ? `[${host}]` : host}:${port}` : '');
  if (base === '')
    throw new InstallError('no API server: KUBERNETES_SERVICE_HOST/PORT (or PODWIRE_API_SERVER) unset');
  const url = new URL(path, base);
  const token = readFileSync(join(saDir, 'token'), 'utf8').trim();
  const caPath = join(saDir, 'ca.crt');
  const options = {
    headers: { Authorization: `Bearer ${token}`, Accept: 'application/json' },
    timeout: API_TIMEOUT_MS,
    ...(url.protocol === 'https:' && existsSync(caPath) ? { ca: readFileSync(caPath) } : {}),
  };
  return new Promise((resolve, reject) => {
    const req = (url.protocol === 'https:' ? https : http).get(url, options, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => {
        body += d;
      });
      res.on('end', () => {
        if (res.statusCode !== 200) {
          reject(new InstallError(`GET ${url.pathname}: HTTP ${res.statusCode}: ${body.slice(0, 300)}`));
          return;
        }
        try {
          resolve(JSON.parse(body));
        } catch (err) {
          reject(new InstallError(`GET ${url.pathname}: not JSON`, { cause: err }));
        }
      });
    });
    req.on('timeout', () =>
      req.destroy(new InstallError(`GET ${url.pathname}: no answer in ${API_TIMEOUT_MS} ms`)),
    );
    req.on('error', reject);
  });
}

/** The Node object of NODE_NAME, asked once. */
let nodeObject;
function thisNode() {
  const nodeName = process.env.NODE_NAME;
  if (!nodeName) throw new InstallError('NODE_NAME is unset (the DaemonSet sets it from spec.nodeName)');
  nodeObject ??= getJson(`/api/v1/nodes/${encodeURIComponent(nodeName)}`);
  return { nodeName, node: nodeObject };
}

/**
 * The interface of this host (the init container runs in the host's network namespace) that holds
 * one of the Node's InternalIPs: the node's uplink, whatever it is called on this node.
 */
async function nodeUplink() {
  const { nodeName, node } = thisNode();
  const ips = ((await node)?.status?.addresses ?? [])
    .filter((a) => a?.type === 'InternalIP')
    .map((a) => a.address);
  if (ips.length === 0)
    throw new InstallError(`PODWIRE_UPLINK=node: node ${nodeName} has no InternalIP in status.addresses`);
  for (const [name, addrs] of Object.entries(networkInterfaces())) {
    if ((addrs ?? []).some((a) => ips.includes(a.address))) return { name, ips };
  }
  throw new InstallError(
    `PODWIRE_UPLINK=node: no interface of this host holds node ${nodeName}'s InternalIP ${ips.join(', ')}; ` +
      'set uplink in the ConfigMap and PODWIRE_UPLINK=config',
  );
}

/** The Node's pod CIDRs (spec.podCIDRs, or the older single spec.podCIDR). */
async function nodePodCIDRs() {
  const { nodeName, node: pending } = thisNode();
  const node = await pending;
  const cidrs = node?.spec?.podCIDRs ?? (node?.spec?.podCIDR ? [node.spec.podCIDR] : []);
  if (!Array.isArray(cidrs) || cidrs.length === 0) {
    throw new InstallError(
      `node ${nodeName} has no spec.podCIDRs: let the controller manager allocate them ` +
        '(--allocate-node-cidrs, kubeadm --pod-network-cidr), or set PODWIRE_POD_CIDRS=config on a single node',
    );
  }
  return cidrs;
}

/** Step 1: the agent configuration for this node, as text, checked by the agent's parser. */
async function renderAgentConfig(configIn) {
  const doc = parseDocument(readFileSync(join(configIn, 'agent.yaml'), 'utf8'));
  if (doc.errors.length > 0) throw new InstallError(`agent.yaml: ${doc.errors[0].message}`);
  const mode = env('PODWIRE_POD_CIDRS', 'node');
  if (mode === 'node') {
    const cidrs = await nodePodCIDRs();
    doc.set('podCIDRs', cidrs);
    log('info', 'pod CIDRs from the node', { node: process.env.NODE_NAME, podCIDRs: cidrs });
  } else if (mode !== 'config') {
    throw new InstallError(`PODWIRE_POD_CIDRS=${mode}: must be node or config`);
  }
  const uplinkMode = env('PODWIRE_UPLINK', 'config');
  if (uplinkMode === 'node') {
    if (!doc.has('cluster'))
      throw new InstallError('PODWIRE_UPLINK=node: agent.yaml has no cluster: section');
    // Bridging moves the node's address from the uplink to the bridge: looked up again, it would
    // name the bridge.
    if (doc.has('bridging'))
      throw new InstallError('PODWIRE_UPLINK=node: not with bridging (set uplink and bridging.uplink)');
    const { name, ips } = await nodeUplink();
    doc.set('uplink', name);
    log('info', 'uplink from the node', { node: process.env.NODE_NAME, internalIP: ips, uplink: name });
  } else if (uplinkMode !== 'config') {
    throw new InstallError(`PODWIRE_UPLINK=${uplinkMode}: must be node or config`);
  }
  // With a cluster store each agent registers its node under nodeName, which defaults to the host
  // name: not always the Node's name (kubelet --hostname-override, clouds' FQDNs), and on nodes that
  // share a host name (several nodes on one machine) every agent would register as the same node.
  // The Node's own name, unless the ConfigMap names one.
  if (doc.has('cluster') && !doc.has('nodeName') && process.env.NODE_NAME) {
    doc.set('nodeName', process.env.NODE_NAME);
    log('info', 'node name from the node', { node: process.env.NODE_NAME });
  }
  const text = doc.toString();
  return { text, config: parseAgentConfig(text) };
}

/**
 * Step 2: the conflist's plugins, each checked as the agent will check it; the socket must match.
 * Returns the conflist's cniVersion and the types of the plugins chained after podwire.
 */
function checkConflist(text, agentSocket) {
  let list;
  try {
    list = JSON.parse(text);
  } catch (err) {
    throw new InstallError(`${CONFLIST}: not JSON`, { cause: err });
  }
  if (!Array.isArray(list?.plugins) || list.plugins.length === 0)
    throw new InstallError(`${CONFLIST}: no plugins`);
  const chained = [];
  for (const plugin of list.plugins) {
    const conf = parseNetConf(
      JSON.stringify({ cniVersion: list.cniVersion, name: list.name, ...plugin }),
      'ADD',
    );
    if (conf.type !== 'podwire') {
      chained.push(conf.type);
      continue;
    }
    const socket = conf.socket ?? DEFAULT_CONFIG.socket;
    if (socket !== agentSocket) {
      throw new InstallError(`${CONFLIST}: socket ${socket} is not the agent's (${agentSocket})`);
    }
  }
  if (list.plugins[0]?.type !== 'podwire')
    throw new InstallError(`${CONFLIST}: podwire must come first, the plugins after it chain on its result`);
  // podwire shapes the bandwidth annotations itself (decision 42); the reference plugin would fail
  // every pod with an egress annotation on podwire's ingress qdisc (the checksum hop, decision 32).
  if (chained.includes('bandwidth'))
    throw new InstallError(
      `${CONFLIST}: bandwidth is chained after podwire: podwire shapes bandwidth itself, and the reference ` +
        'bandwidth plugin fails on its host veths ("create ingress qdisc: file exists"); remove the bandwidth ' +
        'entry and declare "capabilities": {"bandwidth": true} on podwire\'s (decision 42)',
    );
  return { cniVersion: list.cniVersion, chained };
}

/** Step 2, continued: the plugin at `path` (`what`, for messages) speaks `cniVersion`. */
function checkPlugin(path, what, cniVersion) {
  let answer;
  try {
    // No stdin: a plugin may answer VERSION without reading it, and writing to it would then fail
    // with EPIPE; the supportedVersions list does not depend on it.
    const out = execFileSync(path, [], {
      env: { CNI_COMMAND: 'VERSION' },
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: VERSION_TIMEOUT_MS,
    });
    answer = JSON.parse(out.toString());
  } catch (err) {
    throw new InstallError(`${what}: VERSION failed: ${err instanceof Error ? err.message : err}`, {
      cause: err,
    });
  }
  if (!answer?.supportedVersions?.includes(cniVersion)) {
    throw new InstallError(
      `${CONFLIST}: cniVersion ${cniVersion} is not one ${what} speaks (${answer?.supportedVersions?.join(', ')})`,
    );
  }
}

/**
 * Step 2, continued: where each chained plugin comes from. The image's build, which must be there;
 * with `keep`, the host's own where it has one. Either must speak the conflist's cniVersion.
 */
function pluginSources(types, { pluginDir, binDir, mode, cniVersion }) {
  return types.map((type) => {
    const host = join(binDir, type);
    if (mode === 'keep' && existsSync(host)) {
      checkPlugin(host, `the host's ${type}`, cniVersion);
      return { type, from: undefined };
    }
    const image = join(pluginDir, type);
    if (!existsSync(image)) throw new InstallError(`${CONFLIST}: plugin ${type} is not in the image (${image})`);
    checkPlugin(image, type, cniVersion);
    return { type, from: image };
  });
}

/** The CNI configuration files in `dir` a runtime reads before podwire's (libcni's ConfFiles: by name). */
function configsBefore(dir) {
  const ours = Buffer.from(CONFLIST);
  return readdirSync(dir)
    .filter((f) => /\.(conf|conflist|json)$/.test(f) && Buffer.compare(Buffer.from(f), ours) < 0)
    .sort();
}

async function main() {
  const configIn = env('PODWIRE_CONFIG_IN', '/etc/podwire-config');
  const configOut = env('PODWIRE_CONFIG_OUT', '/etc/podwire');
  const binDir = env('CNI_BIN_DIR', '/host/opt/cni/bin');
  const netDir = env('CNI_NET_DIR', '/host/etc/cni/net.d');
  const relay = env('PODWIRE_RELAY', '/opt/podwire/bin/podwire-cni');
  const pluginDir = env('PODWIRE_PLUGIN_DIR', '/opt/podwire/cni-plugins');
  const pluginMode = env('PODWIRE_PLUGINS', 'replace');
  if (pluginMode !== 'replace' && pluginMode !== 'keep')
    throw new InstallError(`PODWIRE_PLUGINS=${pluginMode}: must be replace or keep`);

  const { text, config } = await renderAgentConfig(configIn);
  const conflist = readFileSync(join(configIn, CONFLIST), 'utf8');
  const { cniVersion, chained } = checkConflist(conflist, config.socket);
  const sources = pluginSources(chained, { pluginDir, binDir, mode: pluginMode, cniVersion });

  const install = (from, name) =>
    replaceFile(join(binDir, name), (tmp) => {
      copyFileSync(from, tmp);
      chmodSync(tmp, 0o755);
    });
  replaceFile(join(configOut, 'agent.yaml'), (tmp) => writeFileSync(tmp, text));
  install(relay, 'podwire');
  for (const { type, from } of sources) if (from !== undefined) install(from, type);
  const kept = sources.filter((p) => p.from === undefined).map((p) => p.type);
  replaceFile(join(netDir, CONFLIST), (tmp) => writeFileSync(tmp, conflist));
  const before = configsBefore(netDir);
  if (before.length > 0) {
    log(
      'warn',
      `CNI configuration that sorts before ${CONFLIST}: runtimes use the first file, so pods get ` +
        "that network, not podwire's; remove or rename it",
      { dir: netDir, before },
    );
  }
  log('info', 'installed', {
    config: join(configOut, 'agent.yaml'),
    plugin: join(binDir, 'podwire'),
    chained: chained.map((type) => join(binDir, type)),
    ...(kept.length > 0 ? { keptHostPlugins: kept } : {}),
    conflist: join(netDir, CONFLIST),
    podCIDRs: config.podCIDRs,
  });
}

main().catch((err) => {
  // InstallError and the parsers' PodwireError carry messages meant for the operator.
  log('error', 'install failed', {
    error: err instanceof Error ? err.message : String(err),
    code: err?.code,
  });
  process.exitCode = 1;
});
