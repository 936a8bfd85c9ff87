/**
 * The plugin configuration on stdin (SPEC.md "Plugin configuration objects" and section 3,
 * "Deriving execution configuration"), validated for the command it comes with.
 *
 * Error codes: undecodable input is ERR_DECODE (6); a missing or mistyped field is ERR_INVALID_CONFIG (7)
 * naming the field; a version podwire does not speak, or one too old for the command, is
 * ERR_INCOMPATIBLE_VERSION (1). Keys nobody defines pass through in `raw` (runtimes add many); keys the
 * spec or podwire define must have the right type.
 */

import { DecodeError, IncompatibleVersionError, type PodwireError } from '../base/errors.js';
import { formatIp, isPrefix, parseIp, parsePrefix } from '../base/ip.js';
import {
  expectObject,
  fieldPath,
  invalid,
  isJsonObject,
  type JsonObject,
  own,
  readArray,
  readBoolean,
  readObject,
  readString,
  requireString,
} from './json.js';
import {
  quote,
  validateAbsolutePath,
  validateContainerID,
  validateInterfaceName,
  validateNetworkName,
  validatePluginType,
} from './names.js';
import { parseDns, parseResult } from './result.js';
import type { Attachment, CniCommand, ConfRoute, NetConf } from './types.js';
import { isSupportedVersion, SUPPORTED_VERSIONS, supportsCheck, supportsGcStatus } from './versions.js';

/** The GC key as libcni sends it, and as SPEC.md names it since the 1.1.0 erratum. */
export const VALID_ATTACHMENTS_KEY = 'cni.dev/valid-attachments';
/** The name SPEC.md 1.1.0 first printed; libcni sends both, a runtime following the text sends only this. */
export const VALID_ATTACHMENTS_KEY_ORIGINAL = 'cni.dev/attachments';

/**
 * Stdin decoded once: UTF-8, then JSON, then a top-level object. The dispatcher decodes a call's stdin
 * once and hands the result to `parseNetConf` (and reads the version for an error answer from it).
 * Invalid UTF-8 is a decode error too: replacing it would hand a different name to the kernel than
 * the runtime sent.
 */
export class DecodedStdin {
  readonly text: string;
  readonly value: JsonObject | undefined;
  readonly #reason: string | undefined;
  readonly #cause: unknown;

  private constructor(text: string, value: JsonObject | undefined, reason?: string, cause?: unknown) {
    this.text = text;
    this.value = value;
    this.#reason = reason;
    this.#cause = cause;
  }

  static decode(stdin: Buffer | string | DecodedStdin): DecodedStdin {
    if (stdin instanceof DecodedStdin) return stdin;
    let text: string;
    try {
      text = typeof stdin === 'string' ? stdin : new TextDecoder('utf-8', { fatal: true }).decode(stdin);
    } catch (err) {
      return new DecodedStdin('', undefined, 'not valid UTF-8', err);
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      return new DecodedStdin(text, undefined, 'not valid JSON', err);
    }
    if (!isJsonObject(value)) return new DecodedStdin(text, undefined, 'must be a JSON object');
    return new DecodedStdin(text, value);
  }

  /** The top-level object; throws a DecodeError naming `what` when stdin is not one. */
  object(what: string): JsonObject {
    if (this.value !== undefined) return this.value;
    throw new DecodeError(
      `${what}: ${this.#reason}`,
      this.#cause === undefined ? undefined : { cause: this.#cause },
    );
  }
}

function decodeObject(stdin: Buffer | string | DecodedStdin, what: string): JsonObject {
  return DecodedStdin.decode(stdin).object(what);
}

function incompatible(message: string): PodwireError {
  return new IncompatibleVersionError(message);
}

/** Validates `cniVersion` against what podwire speaks and what `command` needs. */
function checkVersion(cniVersion: string, command: CniCommand): void {
  if (!isSupportedVersion(cniVersion)) {
    throw incompatible(
      `cniVersion: ${quote(cniVersion)} is not supported; supported versions: ${SUPPORTED_VERSIONS.join(', ')}`,
    );
  }
  if (command === 'CHECK' && !supportsCheck(cniVersion)) {
    throw incompatible(`cniVersion: CHECK needs 0.4.0 or later, the configuration says ${cniVersion}`);
  }
  if ((command === 'GC' || command === 'STATUS') && !supportsGcStatus(cniVersion)) {
    throw incompatible(`cniVersion: ${command} needs 1.1.0 or later, the configuration says ${cniVersion}`);
  }
}

/**
 * The requested version in a VERSION call's stdin (`{"cniVersion": "..."}`), or undefined when stdin is
 * empty or names none. An unknown version is not an error here: answering it is what VERSION is for.
 */
export function parseVersionRequest(stdin: Buffer | string | DecodedStdin): string | undefined {
  const text =
    stdin instanceof DecodedStdin ? stdin.text : typeof stdin === 'string' ? stdin : stdin.toString('utf8');
  if (text.trim() === '') return undefined;
  return readString(decodeObject(stdin, 'VERSION request'), 'cniVersion', '');
}

export function parseNetConf(
  stdin: Buffer | string | DecodedStdin,
  command: Exclude<CniCommand, 'VERSION'>,
): NetConf {
  const obj = decodeObject(stdin, 'network configuration');

  // The version comes first: it decides how everything else is read.
  const cniVersion = requireString(obj, 'cniVersion', '');
  checkVersion(cniVersion, command);
  const name = requireString(obj, 'name', '');
  const nameReason = validateNetworkName(name);
  if (nameReason !== undefined) throw invalid('name', nameReason);
  const type = requireString(obj, 'type', '');
  const typeReason = validatePluginType(type);
  if (typeReason !== undefined) throw invalid('type', typeReason);

  const conf: NetConf = { cniVersion, name, type, raw: obj };

  const socket = readString(obj, 'socket', '');
  if (socket !== undefined) {
    const reason = validateAbsolutePath(socket);
    if (reason !== undefined) throw invalid('socket', reason);
    conf.socket = socket;
  }

  const prev = own(obj, 'prevResult');
  if (prev !== undefined) {
    conf.prevResult = parseResult(prev, cniVersion, 'prevResult');
  } else if (command === 'CHECK') {
    // SPEC.md "CHECK": the runtime must pass the result of the preceding ADD.
    throw invalid('prevResult', 'missing, required for CHECK');
  }

  const attachments = parseValidAttachments(obj);
  if (attachments !== undefined) {
    conf.validAttachments = attachments;
  } else if (command === 'GC') {
    // Without the list every attachment would look stale; refusing is the only safe answer.
    throw invalid(VALID_ATTACHMENTS_KEY, 'missing, required for GC');
  }

  const runtimeConfig = readObject(obj, 'runtimeConfig', '');
  if (runtimeConfig !== undefined) conf.runtimeConfig = runtimeConfig;
  const args = readObject(obj, 'args', '');
  if (args !== undefined) conf.args = args;
  const capabilities = parseCapabilities(obj);
  if (capabilities !== undefined) conf.capabilities = capabilities;
  const ipam = readObject(obj, 'ipam', '');
  if (ipam !== undefined) {
    // SPEC.md "ipam": `type` names the IPAM plugin; podwire does its own IPAM but keeps the field honest.
    readString(ipam, 'type', 'ipam');
    conf.ipam = ipam;
  }
  const dns = readObject(obj, 'dns', '');
  if (dns !== undefined) conf.dns = parseDns(dns, 'dns');
  const defaultRoute = readBoolean(obj, 'defaultRoute', '');
  if (defaultRoute !== undefined) conf.defaultRoute = defaultRoute;
  const routes = parseConfRoutes(obj, defaultRoute !== false);
  if (routes !== undefined) conf.routes = routes;

  return conf;
}

/**
 * podwire's `routes`: `[{"dst": CIDR, "gw"?: IP}]`. A `dst` with host bits set is refused (the kernel
 * would refuse it at ADD, after the address was claimed); so is a dst listed twice, and a default
 * route while `defaultRoute` adds one anyway (the second would fail with EEXIST at ADD).
 */
function parseConfRoutes(obj: JsonObject, defaultRoute: boolean): ConfRoute[] | undefined {
  const list = readArray(obj, 'routes', '');
  if (list === undefined) return undefined;
  const seen = new Set<string>();
  return list.map((item, i) => {
    const at = fieldPath('routes', i);
    const entry = expectObject(item, at);
    const dstText = requireString(entry, 'dst', at);
    const dst = parsePrefix(dstText);
    if (!isPrefix(dst)) throw invalid(fieldPath(at, 'dst'), `${quote(dstText)}: ${dst.error}`);
    if (dst.length === 0 && defaultRoute) {
      throw invalid(
        fieldPath(at, 'dst'),
        `${dst.text} is the default route, which ADD adds anyway; set "defaultRoute": false to list it here`,
      );
    }
    if (seen.has(dst.text)) throw invalid(fieldPath(at, 'dst'), `${dst.text} is listed twice`);
    seen.add(dst.text);
    const route: ConfRoute = { dst: dst.text };
    const gwText = readString(entry, 'gw', at);
    if (gwText !== undefined) {
      const gw = parseIp(gwText);
      if (gw === undefined) throw invalid(fieldPath(at, 'gw'), `${quote(gwText)} is not an IP address`);
      if (gw.family !== dst.family) {
        throw invalid(fieldPath(at, 'gw'), `is IPv${gw.family} but dst ${dst.text} is IPv${dst.family}`);
      }
      route.gw = formatIp(gw.family, gw.value);
    }
    return route;
  });
}

/**
 * `cni.dev/valid-attachments`, falling back to the erratum's `cni.dev/attachments`. Both are validated
 * when present; the first wins.
 */
function parseValidAttachments(obj: JsonObject): Attachment[] | undefined {
  const primary = parseAttachmentList(obj, VALID_ATTACHMENTS_KEY);
  const original = parseAttachmentList(obj, VALID_ATTACHMENTS_KEY_ORIGINAL);
  return primary ?? original;
}

function parseAttachmentList(obj: JsonObject, key: string): Attachment[] | undefined {
  const list = readArray(obj, key, '');
  if (list === undefined) return undefined;
  return list.map((item, i) => {
    const at = fieldPath(key, i);
    const entry = expectObject(item, at);
    const containerId = requireString(entry, 'containerID', at);
    const idReason = validateContainerID(containerId);
    if (idReason !== undefined) throw invalid(fieldPath(at, 'containerID'), idReason);
    const ifname = requireString(entry, 'ifname', at);
    const ifReason = validateInterfaceName(ifname);
    if (ifReason !== undefined) throw invalid(fieldPath(at, 'ifname'), ifReason);
    return { containerId, ifname };
  });
}

function parseCapabilities(obj: JsonObject): Record<string, boolean> | undefined {
  const caps = readObject(obj, 'capabilities', '');
  if (caps === undefined) return undefined;
  const entries = Object.entries(caps).map(([key, value]): [string, boolean] => {
    if (typeof value !== 'boolean') throw invalid(fieldPath('capabilities', key), 'must be a boolean');
    return [key, value];
  });
  // fromEntries defines own properties, so a `__proto__` key stays data and never becomes a prototype.
  return Object.fromEntries(entries);
}
