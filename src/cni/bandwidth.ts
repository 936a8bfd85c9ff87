/**
 * The `bandwidth` capability (CONVENTIONS.md, "Well-known capabilities"): a runtime passes
 * `runtimeConfig.bandwidth` {ingressRate, ingressBurst, egressRate, egressBurst} to a plugin whose
 * conflist entry declares `"capabilities": {"bandwidth": true}`; the kubelet fills it from the pod's
 * `kubernetes.io/ingress-bandwidth` and `kubernetes.io/egress-bandwidth` annotations. Rates are in
 * bits per second, bursts in bits, as the reference `bandwidth` plugin reads them (decision 42):
 * ingress is traffic to the pod, egress traffic from it.
 *
 * Refused, naming the field (ERR_INVALID_CONFIG): a value that is not a non-negative integer; a rate
 * without a burst or a burst without a rate (the reference plugin's rule); a burst of 4 GiB or more
 * (bytes: the kernel's TBF limit is a u32, the reference plugin's rule too); a rate above 1 Pbit/s
 * (the largest the kubelet accepts) or below 8 bit/s (the TBF counts whole bytes per second). What
 * depends on the node (a burst that holds no full frame of the MTU) is judged by the datapath
 * (datapath/pod-bandwidth.ts), also before anything is created.
 */
import type { PodwireError } from '../base/errors.js';
import { InvalidConfigError } from '../base/errors.js';

/** One direction's limit: rate in bits/s, burst in bits. */
export interface RateLimit {
  rateBits: number;
  burstBits: number;
}

/** What the capability asks for; a direction without a rate is not shaped. */
export interface BandwidthLimits {
  /** Traffic to the pod. */
  ingress?: RateLimit;
  /** Traffic from the pod. */
  egress?: RateLimit;
}

/** The largest rate accepted: 1 Pbit/s, the kubelet's own maximum for the annotations. */
export const MAX_RATE_BITS = 1e15;
/** A burst must stay under 4 GiB in bytes (the TBF's u32 limit). */
const MAX_BURST_BYTES = 2 ** 32;

function bad(field: string, why: string): PodwireError {
  return new InvalidConfigError(`runtimeConfig.bandwidth.${field}: ${why}`);
}

/**
 * A field of `runtimeConfig.bandwidth` by its name in any letter case, the exact name first: runtimes
 * written in Go pass the struct as `encoding/json` prints it (containerd 1.6 sends `IngressRate`,
 * `IngressBurst`, ...), and the reference plugin reads it back as `encoding/json` does, ignoring case.
 * Two keys that differ only in case are refused: which one the runtime meant is not known.
 */
function lookup(obj: Record<string, unknown>, field: string): unknown {
  if (Object.hasOwn(obj, field)) return obj[field];
  const keys = Object.keys(obj).filter((k) => k.toLowerCase() === field.toLowerCase());
  if (keys.length > 1)
    throw bad(field, `given twice, as ${keys.map((k) => JSON.stringify(k)).join(' and ')}`);
  return keys.length === 1 ? obj[keys[0] as string] : undefined;
}

function readCount(obj: Record<string, unknown>, field: string): number {
  const v = lookup(obj, field);
  if (v === undefined || v === null) return 0;
  if (typeof v !== 'number' || !Number.isInteger(v))
    throw bad(field, `${JSON.stringify(v)} is not an integer (bits${field.endsWith('Rate') ? '/s' : ''})`);
  if (v < 0) throw bad(field, `${v} is negative`);
  return v;
}

function direction(obj: Record<string, unknown>, dir: 'ingress' | 'egress'): RateLimit | undefined {
  const rateField = `${dir}Rate`;
  const burstField = `${dir}Burst`;
  const rate = readCount(obj, rateField);
  const burst = readCount(obj, burstField);
  if (rate === 0 && burst === 0) return undefined;
  if (burst === 0) throw bad(burstField, `0 with ${rateField} ${rate}: a rate needs a burst`);
  if (rate === 0) throw bad(rateField, `0 with ${burstField} ${burst}: a burst needs a rate`);
  if (rate > MAX_RATE_BITS) throw bad(rateField, `${rate} bit/s is above 1 Pbit/s`);
  if (rate < 8) throw bad(rateField, `${rate} bit/s is less than one byte per second`);
  if (burst / 8 >= MAX_BURST_BYTES) throw bad(burstField, `${burst} bits is 4 GiB or more`);
  return { rateBits: rate, burstBits: burst };
}

/**
 * `runtimeConfig.bandwidth` checked; undefined when absent or when it limits neither direction. Every
 * check runs before ADD touches anything.
 */
export function parseBandwidth(
  runtimeConfig: Record<string, unknown> | undefined,
): BandwidthLimits | undefined {
  const raw = runtimeConfig?.bandwidth;
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== 'object' || Array.isArray(raw))
    throw new InvalidConfigError('runtimeConfig.bandwidth: must be an object');
  const obj = raw as Record<string, unknown>;
  const ingress = direction(obj, 'ingress');
  const egress = direction(obj, 'egress');
  if (ingress === undefined && egress === undefined) return undefined;
  return { ...(ingress ? { ingress } : {}), ...(egress ? { egress } : {}) };
}
