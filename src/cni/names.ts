/**
 * The name rules libcni enforces (pkg/utils: ValidateContainerID, ValidateNetworkName,
 * ValidateInterfaceName). Each returns the reason a value is refused, or undefined when it is fine,
 * so that the caller can name the field and pick the error code.
 */

/** Container IDs and network names: an alphanumeric, then alphanumerics, `_`, `.` or `-`. */
const CNI_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

/** IFNAMSIZ is 16 with the terminating NUL. */
export const MAX_IFNAME_BYTES = 15;

/** Mirrors Go's unicode.IsSpace, which libcni uses; the kernel's dev_valid_name refuses the ASCII ones. */
const WHITESPACE = /\p{White_Space}/u;

export function validateContainerID(id: string): string | undefined {
  if (id === '') return 'missing';
  if (!CNI_NAME.test(id)) return `invalid characters in ${quote(id)}`;
  return undefined;
}

export function validateNetworkName(name: string): string | undefined {
  if (name === '') return 'missing';
  if (!CNI_NAME.test(name)) return `invalid characters in ${quote(name)}`;
  return undefined;
}

export function validateInterfaceName(ifname: string): string | undefined {
  if (ifname === '') return 'empty';
  // The kernel counts bytes, not characters.
  if (Buffer.byteLength(ifname, 'utf8') > MAX_IFNAME_BYTES) return `longer than ${MAX_IFNAME_BYTES} bytes`;
  if (ifname === '.' || ifname === '..') return `${quote(ifname)} is not an interface name`;
  // NUL is not refused by libcni, but it would silently truncate the name at the netlink boundary.
  if (/[/:\0]/.test(ifname) || WHITESPACE.test(ifname)) {
    return `${quote(ifname)} contains '/', ':', NUL or whitespace`;
  }
  return undefined;
}

/** SPEC.md "type": names a binary, so it must not contain path separators. */
export function validatePluginType(type: string): string | undefined {
  if (type === '') return 'missing';
  if (/[/\\\0]/.test(type)) return `${quote(type)} contains a path separator or NUL`;
  return undefined;
}

/** An absolute path without NUL; no normalization, the caller opens exactly what it was given. */
export function validateAbsolutePath(path: string): string | undefined {
  if (path === '') return 'missing';
  if (!path.startsWith('/')) return `${quote(path)} is not an absolute path`;
  if (path.includes('\0')) return 'contains NUL';
  return undefined;
}

/** JSON-quotes a value for a message, cut short so that a hostile value cannot flood logs. */
export function quote(value: string): string {
  const max = 64;
  return JSON.stringify(value.length > max ? `${value.slice(0, max)}…` : value);
}
