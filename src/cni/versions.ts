/**
 * CNI spec versions podwire speaks (SPEC.md "Released versions"), and what each one allows.
 *
 * 0.1.0 and 0.2.0 are left out: their result type (`ip4`/`ip6`) predates plugin chaining and no runtime
 * that podwire targets still sends them.
 */

export const SUPPORTED_VERSIONS = ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] as const;

export type CniVersion = (typeof SUPPORTED_VERSIONS)[number];

/** The newest version podwire implements; the answer to VERSION when the request names none it knows. */
export const LATEST_VERSION: CniVersion = '1.1.0';

/** The VERSION answer (SPEC.md "VERSION: probe plugin version support"). */
export interface VersionInfo {
  cniVersion: string;
  supportedVersions: string[];
}

const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$/;

export function isSupportedVersion(v: string): v is CniVersion {
  return (SUPPORTED_VERSIONS as readonly string[]).includes(v);
}

/**
 * Orders two `major.minor.patch` versions: negative when a < b, 0 when equal, positive when a > b.
 * Throws on anything else, because ordering a malformed version silently would let it pass a gate.
 */
export function compareVersions(a: string, b: string): number {
  const pa = parseSemver(a);
  const pb = parseSemver(b);
  for (let i = 0; i < 3; i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

function parseSemver(v: string): [number, number, number] {
  const m = SEMVER.exec(v);
  if (m === null) throw new RangeError(`not a major.minor.patch version: ${JSON.stringify(v)}`);
  return [Number(m[1]), Number(m[2]), Number(m[3])];
}

/** CHECK exists from 0.4.0 on. */
export function supportsCheck(v: string): boolean {
  return compareVersions(v, '0.4.0') >= 0;
}

/** GC and STATUS exist from 1.1.0 on. */
export function supportsGcStatus(v: string): boolean {
  return compareVersions(v, '1.1.0') >= 0;
}

/** 0.3.x and 0.4.0 results carry `version: "4"|"6"` on every `ips` entry; 1.0.0 removed it. */
export function hasIpVersionField(v: string): boolean {
  return compareVersions(v, '1.0.0') < 0;
}

/** Interface `mtu`/`socketPath`/`pciID` and route `mtu`/`advmss`/`priority`/`table`/`scope` are 1.1.0 fields. */
export function hasResultExtensions(v: string): boolean {
  return compareVersions(v, '1.1.0') >= 0;
}

/**
 * The VERSION answer. It echoes the requested version when podwire speaks it (so the runtime can decode
 * the answer with the version it asked in), otherwise it answers in the latest version.
 */
export function versionInfo(cniVersion?: string): VersionInfo {
  const answer = cniVersion !== undefined && isSupportedVersion(cniVersion) ? cniVersion : LATEST_VERSION;
  return { cniVersion: answer, supportedVersions: [...SUPPORTED_VERSIONS] };
}
