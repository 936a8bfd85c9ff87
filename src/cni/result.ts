/**
 * The ADD result on the wire, per spec version (SPEC.md "Success"; spec-v0.4.0 "Result").
 *
 * Differences between the versions podwire speaks:
 * - 0.3.0, 0.3.1, 0.4.0: every `ips` entry carries `version: "4"|"6"`.
 * - 1.0.0: `version` removed.
 * - 1.1.0: interfaces gain `mtu`, `socketPath`, `pciID`; routes gain `mtu`, `advmss`, `priority`, `table`,
 *   `scope`. Older versions never see these keys.
 *
 * `formatResult` always writes `interfaces`, `ips`, `routes` and `dns` (possibly empty) so that the
 * output for a given result and version is exactly one JSON text.
 */

import { IncompatibleVersionError, InternalError } from '../base/errors.js';
import { cidrFamily, type IpFamily, ipFamily } from '../base/ip.js';
import {
  expectObject,
  fieldPath,
  invalid,
  type JsonObject,
  own,
  readArray,
  readObject,
  readString,
  readStringArray,
  readUint32,
  requireString,
} from './json.js';
import type { CniDns, CniInterface, CniIpConfig, CniResult, CniRoute } from './types.js';
import {
  hasIpVersionField,
  hasResultExtensions,
  isSupportedVersion,
  SUPPORTED_VERSIONS,
  type VersionInfo,
  versionInfo,
} from './versions.js';

/** The JSON object to print for `result` in `cniVersion`; throws ERR_INCOMPATIBLE_VERSION for others. */
export function formatResult(result: CniResult, cniVersion: string): JsonObject {
  requireSupported(cniVersion);
  const extended = hasResultExtensions(cniVersion);
  const versioned = hasIpVersionField(cniVersion);
  return {
    cniVersion,
    interfaces: result.interfaces.map((intf) => formatInterface(intf, extended)),
    ips: result.ips.map((ip) => formatIp(ip, versioned)),
    routes: result.routes.map((route) => formatRoute(route, extended)),
    dns: formatDns(result.dns),
  };
}

/** The VERSION answer, in the requested version when podwire speaks it, else in the latest. */
export function formatVersionResult(requested?: string): VersionInfo {
  return versionInfo(requested);
}

function requireSupported(cniVersion: string): void {
  if (!isSupportedVersion(cniVersion)) {
    throw new IncompatibleVersionError(
      `cniVersion: ${JSON.stringify(cniVersion)} is not supported; supported versions: ${SUPPORTED_VERSIONS.join(', ')}`,
    );
  }
}

function formatInterface(intf: CniInterface, extended: boolean): JsonObject {
  const out: JsonObject = { name: intf.name };
  if (intf.mac !== undefined) out.mac = intf.mac;
  if (extended && intf.mtu !== undefined) out.mtu = intf.mtu;
  if (intf.sandbox !== undefined) out.sandbox = intf.sandbox;
  if (extended && intf.socketPath !== undefined) out.socketPath = intf.socketPath;
  if (extended && intf.pciID !== undefined) out.pciID = intf.pciID;
  return out;
}

function formatIp(ip: CniIpConfig, versioned: boolean): JsonObject {
  const out: JsonObject = {};
  if (versioned) {
    const family = cidrFamily(ip.address);
    if (family === undefined) {
      // Only a bug inside podwire can get here: every address it reports comes from its own IPAM.
      throw new InternalError(`ips.address: ${JSON.stringify(ip.address)} is not an address/prefix`);
    }
    out.version = String(family);
  }
  out.address = ip.address;
  if (ip.gateway !== undefined) out.gateway = ip.gateway;
  if (ip.interface !== undefined) out.interface = ip.interface;
  return out;
}

function formatRoute(route: CniRoute, extended: boolean): JsonObject {
  const out: JsonObject = { dst: route.dst };
  if (route.gw !== undefined) out.gw = route.gw;
  if (extended) {
    for (const key of ROUTE_EXTENSIONS) {
      const value = route[key];
      if (value !== undefined) out[key] = value;
    }
  }
  return out;
}

const ROUTE_EXTENSIONS = ['mtu', 'advmss', 'priority', 'table', 'scope'] as const;

function formatDns(dns: CniDns): JsonObject {
  const out: JsonObject = {};
  if (dns.nameservers !== undefined) out.nameservers = [...dns.nameservers];
  if (dns.domain !== undefined) out.domain = dns.domain;
  if (dns.search !== undefined) out.search = [...dns.search];
  if (dns.options !== undefined) out.options = [...dns.options];
  return out;
}

/**
 * Reads a result written in `version` (typically a `prevResult`) into the 1.x shape. The result's own
 * `cniVersion` key is ignored, as libcni does: the enclosing configuration's version decides the format.
 * Keys that no version defines are ignored; known keys with a wrong type or value are ERR_INVALID_CONFIG
 * naming the field, prefixed by `at`.
 */
export function parseResult(json: unknown, version: string, at = 'result'): CniResult {
  requireSupported(version);
  const obj = expectObject(json, at);
  const interfaces = (readArray(obj, 'interfaces', at) ?? []).map((item, i) =>
    parseInterface(item, fieldPath(fieldPath(at, 'interfaces'), i)),
  );
  const ips = (readArray(obj, 'ips', at) ?? []).map((item, i) =>
    parseIp(item, fieldPath(fieldPath(at, 'ips'), i), hasIpVersionField(version), interfaces.length),
  );
  const routes = (readArray(obj, 'routes', at) ?? []).map((item, i) =>
    parseRoute(item, fieldPath(fieldPath(at, 'routes'), i)),
  );
  const dnsObj = readObject(obj, 'dns', at);
  const dns = dnsObj === undefined ? {} : parseDns(dnsObj, fieldPath(at, 'dns'));
  return { interfaces, ips, routes, dns };
}

function parseInterface(item: unknown, at: string): CniInterface {
  const obj = expectObject(item, at);
  const out: CniInterface = { name: requireString(obj, 'name', at) };
  const mac = readString(obj, 'mac', at);
  if (mac !== undefined) out.mac = mac;
  // 1.1.0 keys are accepted in any version: libcni's 1.0.0 type already carries them.
  const mtu = readUint32(obj, 'mtu', at);
  if (mtu !== undefined) out.mtu = mtu;
  const sandbox = readString(obj, 'sandbox', at);
  if (sandbox !== undefined) out.sandbox = sandbox;
  const socketPath = readString(obj, 'socketPath', at);
  if (socketPath !== undefined) out.socketPath = socketPath;
  const pciID = readString(obj, 'pciID', at);
  if (pciID !== undefined) out.pciID = pciID;
  return out;
}

function parseIp(item: unknown, at: string, versioned: boolean, interfaceCount: number): CniIpConfig {
  const obj = expectObject(item, at);
  const address = requireString(obj, 'address', at);
  const family = cidrFamily(address);
  if (family === undefined)
    throw invalid(fieldPath(at, 'address'), `${JSON.stringify(address)} is not address/prefix`);
  if (versioned) checkVersionField(obj, at, family);
  const out: CniIpConfig = { address };
  const gateway = readString(obj, 'gateway', at);
  if (gateway !== undefined) {
    checkAddress(gateway, fieldPath(at, 'gateway'), family);
    out.gateway = gateway;
  }
  const index = readUint32(obj, 'interface', at);
  if (index !== undefined) {
    if (index >= interfaceCount) {
      throw invalid(
        fieldPath(at, 'interface'),
        `index ${index} is out of range (${interfaceCount} interfaces)`,
      );
    }
    out.interface = index;
  }
  return out;
}

/** 0.x `version` is optional on input (it is implied by the address) but must agree when present. */
function checkVersionField(obj: JsonObject, at: string, family: IpFamily): void {
  const value = own(obj, 'version');
  if (value === undefined) return;
  if (value !== '4' && value !== '6') throw invalid(fieldPath(at, 'version'), 'must be "4" or "6"');
  if (value !== String(family)) {
    throw invalid(fieldPath(at, 'version'), `is "${value}" but the address is IPv${family}`);
  }
}

function checkAddress(value: string, at: string, family: IpFamily): void {
  const got = ipFamily(value);
  if (got === undefined) throw invalid(at, `${JSON.stringify(value)} is not an IP address`);
  if (got !== family) throw invalid(at, `is IPv${got} but belongs to an IPv${family} entry`);
}

function parseRoute(item: unknown, at: string): CniRoute {
  const obj = expectObject(item, at);
  const dst = requireString(obj, 'dst', at);
  const family = cidrFamily(dst);
  if (family === undefined)
    throw invalid(fieldPath(at, 'dst'), `${JSON.stringify(dst)} is not address/prefix`);
  const out: CniRoute = { dst };
  const gw = readString(obj, 'gw', at);
  if (gw !== undefined) {
    checkAddress(gw, fieldPath(at, 'gw'), family);
    out.gw = gw;
  }
  for (const key of ROUTE_EXTENSIONS) {
    const value = readUint32(obj, key, at);
    if (value !== undefined) out[key] = value;
  }
  return out;
}

/** Also used for the `dns` key of a configuration. */
export function parseDns(obj: JsonObject, at: string): CniDns {
  const out: CniDns = {};
  const nameservers = readStringArray(obj, 'nameservers', at);
  if (nameservers !== undefined) out.nameservers = nameservers;
  const domain = readString(obj, 'domain', at);
  if (domain !== undefined) out.domain = domain;
  const search = readStringArray(obj, 'search', at);
  if (search !== undefined) out.search = search;
  const options = readStringArray(obj, 'options', at);
  if (options !== undefined) out.options = options;
  return out;
}
