/**
 * Kubernetes object names (RFC 1123, as Kubernetes validates them): a DNS label is 1-63 lower-case
 * letters, digits and '-', starting and ending with a letter or digit (pool names); a DNS subdomain
 * is such labels joined by '.', at most 253 characters in all (node names).
 */

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export function isDnsLabel(text: unknown): text is string {
  return typeof text === 'string' && DNS_LABEL.test(text);
}

export function isDnsSubdomain(text: unknown): text is string {
  return typeof text === 'string' && text.length <= 253 && DNS_SUBDOMAIN.test(text);
}
