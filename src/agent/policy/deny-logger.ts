/**
 * Denied NetworkPolicy packets as log lines (issue 28, "Seeing it"; decision 51): one JSON line per
 * packet, `policy-denied`, naming the local pod, the direction, source, destination, protocol and
 * destination port, the policies that isolate the pod for that direction, and that no rule of theirs
 * allows the packet.
 *
 * Two limits stand between a flood and the log. The kernel's (the deny chains' `limit`, per direction
 * and family) bounds what reaches the agent at all; this one bounds the lines (a token bucket,
 * `rate` per second with `burst`), and what it holds back is counted: the next line carries
 * `suppressed` (how many were not written since the previous line), and a quiet period after
 * suppression ends with one `policy-denied-suppressed` line. The source is read on a timer, a bounded
 * number of the kernel's messages per read and nothing kept between reads but the counters, so a
 * flood neither blocks the event loop nor grows memory.
 */
import type { DeniedPacket, DeniedPacketLog } from '../../datapath/policy-backend.js';
import type { PodPolicy } from '../../policy/model.js';
import type { Logger } from '../log.js';

/** Why a logged packet was dropped: the isolating policies are named beside it. */
export const NO_RULE_ALLOWS = 'no rule of the isolating policies allows it';

export interface DenyLoggerOptions {
  source: DeniedPacketLog;
  /** What the last apply installed (the policy controller's `applied()`). */
  applied: () => readonly PodPolicy[];
  log: Logger;
  /** Lines per second (default 10) and the burst above it (default 20). */
  rate?: number;
  burst?: number;
  /** How often the source is read (default 200 ms). */
  intervalMs?: number;
  /** Milliseconds, monotonic (tests). */
  now?: () => number;
}

export interface DenyLoggerStats {
  /** `policy-denied` lines written. */
  lines: number;
  /** Denied packets read but not written as a line. */
  suppressed: number;
  /** Times the kernel's queue overflowed (packets lost before the agent read them). */
  overruns: number;
}

export class DenyLogger {
  readonly #o: Required<Omit<DenyLoggerOptions, 'now'>> & { now: () => number };
  #tokens: number;
  #refilledAt: number;
  /** Suppressed since the last line written. */
  #pending = 0;
  readonly #stats: DenyLoggerStats = { lines: 0, suppressed: 0, overruns: 0 };
  #timer: NodeJS.Timeout | undefined;
  #index: { from: readonly PodPolicy[]; byIp: Map<string, PodPolicy> } | undefined;
  #closed = false;

  constructor(opts: DenyLoggerOptions) {
    this.#o = {
      rate: 10,
      burst: 20,
      intervalMs: 200,
      now: () => performance.now(),
      ...opts,
    };
    if (!(this.#o.rate > 0) || !(this.#o.burst >= 1))
      throw new RangeError(`deny log: rate ${this.#o.rate} and burst ${this.#o.burst} must be positive`);
    this.#tokens = this.#o.burst;
    this.#refilledAt = this.#o.now();
  }

  /** Reads the source every `intervalMs` until `stop()`; the timer does not keep the process alive. */
  start(): void {
    if (this.#timer || this.#closed) return;
    this.#timer = setInterval(() => this.poll(), this.#o.intervalMs);
    this.#timer.unref();
  }

  /** One read of the source: a line per packet while tokens last, the rest counted. */
  poll(): void {
    if (this.#closed) return;
    let got: { packets: DeniedPacket[]; overruns: number };
    try {
      got = this.#o.source.read();
    } catch (err) {
      // A read that fails (the socket gone under us) must not stop the agent: logged, retried next tick.
      this.#o.log.warn('policy-denied-read-failed', { error: String(err) });
      return;
    }
    if (got.overruns > 0) {
      this.#stats.overruns += got.overruns;
      this.#o.log.warn('policy-denied-overrun', {
        overruns: this.#stats.overruns,
        note: 'the kernel dropped denied-packet log messages the agent had not read yet',
      });
    }
    for (const p of got.packets) this.#packet(p);
    if (got.packets.length === 0 && this.#pending > 0 && this.#take()) this.#flushSuppressed();
  }

  #packet(p: DeniedPacket): void {
    if (!this.#take()) {
      this.#pending++;
      this.#stats.suppressed++;
      return;
    }
    const podIp = p.direction === 'ingress' ? p.dst : p.src;
    const pod = this.#pod(podIp);
    const dir = pod?.[p.direction];
    const fields: Record<string, unknown> = {
      pod: pod ? `${pod.namespace}/${pod.name}` : null,
      direction: p.direction,
      src: p.src,
      dst: p.dst,
      protocol: p.protocol,
    };
    if (p.port !== undefined) fields.port = p.port;
    fields.policies = dir?.policies ?? [];
    fields.reason = dir
      ? NO_RULE_ALLOWS
      : 'no rule allows it (the pod is no longer isolated by what is applied)';
    if (this.#pending > 0) fields.suppressed = this.#pending;
    this.#pending = 0;
    this.#stats.lines++;
    this.#o.log.info('policy-denied', fields);
  }

  #flushSuppressed(): void {
    this.#o.log.info('policy-denied-suppressed', { suppressed: this.#pending });
    this.#pending = 0;
  }

  /** Takes one token of the bucket, refilled at `rate` per second up to `burst`. */
  #take(): boolean {
    const now = this.#o.now();
    this.#tokens = Math.min(this.#o.burst, this.#tokens + ((now - this.#refilledAt) * this.#o.rate) / 1000);
    this.#refilledAt = now;
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }

  #pod(ip: string): PodPolicy | undefined {
    const applied = this.#o.applied();
    if (this.#index?.from !== applied) {
      const byIp = new Map<string, PodPolicy>();
      for (const p of applied) for (const a of p.ips) byIp.set(a, p);
      this.#index = { from: applied, byIp };
    }
    return this.#index.byIp.get(ip);
  }

  get stats(): DenyLoggerStats {
    return { ...this.#stats };
  }

  /** Stops reading, writes what is still suppressed, closes the source; idempotent. */
  stop(): void {
    if (this.#closed) return;
    clearInterval(this.#timer);
    this.#timer = undefined;
    try {
      this.poll();
      if (this.#pending > 0) this.#flushSuppressed();
    } finally {
      this.#closed = true;
      this.#o.source.close();
    }
  }
}
