/** The CNI specification layer: types, versions, environment and configuration validation, results. */

export {
  parseNetConf,
  parseVersionRequest,
  VALID_ATTACHMENTS_KEY,
  VALID_ATTACHMENTS_KEY_ORIGINAL,
} from './config.js';
export { parseCniArgs, parseCniPath, parseCommand, parseEnv, podIdentity } from './env.js';
export {
  CNI_CODES,
  type CniErrorObject,
  PodwireError,
  type PodwireErrorCode,
  toCniErrorObject,
} from './errors.js';
export { cidrFamily, type IpFamily, ipFamily } from './ip.js';
export {
  MAX_IFNAME_BYTES,
  validateAbsolutePath,
  validateContainerID,
  validateInterfaceName,
  validateNetworkName,
  validatePluginType,
} from './names.js';
export { formatResult, formatVersionResult, parseResult } from './result.js';
export type {
  Attachment,
  CniAttachmentEnv,
  CniCommand,
  CniDelEnv,
  CniDns,
  CniEnv,
  CniInterface,
  CniIpConfig,
  CniNetworkEnv,
  CniResult,
  CniRoute,
  NetConf,
} from './types.js';
export { CNI_COMMANDS } from './types.js';
export {
  type CniVersion,
  compareVersions,
  hasIpVersionField,
  hasResultExtensions,
  isSupportedVersion,
  LATEST_VERSION,
  SUPPORTED_VERSIONS,
  supportsCheck,
  supportsGcStatus,
  type VersionInfo,
  versionInfo,
} from './versions.js';
