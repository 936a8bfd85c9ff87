/**
 * etcd's key-value API in podwire's terms: the key layout under the prefix, and typed range / txn
 * calls over the JSON gateway (which carries keys and values as base64 and int64 as decimal text,
 * and omits every field that holds its default: false, 0, PUT, EQUAL).
 *
 * Key layout (prefix default "/podwire"):
 *   PREFIX/nodes/NAME    -> NodeRecord as JSON                     (written by the node's agent)
 *   PREFIX/cidrs/CIDR    -> NAME of the node that holds the CIDR  (the lease itself: one key per CIDR)
 *   PREFIX/leases/NAME   -> {"podCIDRs": [...]}                   (the node's side of its leases)
 */
import { GatewayError } from './etcd-answer.js';
import type { EtcdGateway } from './etcd-gateway.js';

export class EtcdKeys {
  readonly prefix: string;

  constructor(prefix: string) {
    this.prefix = prefix;
  }

  get nodes(): string {
    return `${this.prefix}/nodes/`;
  }
  get cidrs(): string {
    return `${this.prefix}/cidrs/`;
  }
  node(name: string): string {
    return `${this.nodes}${name}`;
  }
  cidr(cidr: string): string {
    return `${this.cidrs}${cidr}`;
  }
  lease(name: string): string {
    return `${this.prefix}/leases/${name}`;
  }
  /** A health probe reads this (absent) key: a linearizable read, so it needs a leader. */
  get probe(): string {
    return `${this.prefix}/probe`;
  }
}

export function b64(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64');
}

export function unb64(text: string | undefined): string {
  return Buffer.from(text ?? '', 'base64').toString('utf8');
}

/** The range_end that selects every key starting with `prefix`: the prefix with its last byte + 1. */
export function prefixEnd(prefix: string): string {
  const bytes = Buffer.from(prefix, 'utf8');
  for (let i = bytes.length - 1; i >= 0; i--) {
    if ((bytes[i] as number) < 0xff) {
      const end = Buffer.from(bytes.subarray(0, i + 1));
      end[i] = (end[i] as number) + 1;
      return end.toString('base64');
    }
  }
  return Buffer.from([0]).toString('base64');
}

/** One key as read; revisions are decimal text. */
export interface Kv {
  key: string;
  value: string;
  createRevision: string;
  modRevision: string;
}

/** The gateway's JSON shapes (only the fields podwire reads). */
export interface WireKv {
  key?: string;
  value?: string;
  create_revision?: string;
  mod_revision?: string;
}
export interface WireHeader {
  revision?: string;
}
interface WireRange {
  header?: WireHeader;
  kvs?: WireKv[];
  /** More keys in the range than `limit` let through. */
  more?: boolean;
}

/** Keys per page of `rangePages` (docs/decisions/0023-paged-etcd-lists.md). */
export const RANGE_PAGE_SIZE = 500;
/** gRPC code of a read at a revision etcd has compacted away. */
const GRPC_OUT_OF_RANGE = 11;
/** How often a paged read starts again after a compaction overtook it. */
const PAGED_RESTARTS = 3;
interface WireTxn {
  header?: WireHeader;
  succeeded?: boolean;
  responses?: { response_range?: WireRange }[];
}

export function decodeKv(kv: WireKv): Kv {
  return {
    key: unb64(kv.key),
    value: unb64(kv.value),
    createRevision: kv.create_revision ?? '0',
    modRevision: kv.mod_revision ?? '0',
  };
}

export type Compare =
  | { key: string; createRevision: string }
  | { key: string; modRevision: string }
  | { key: string; value: string };

export type TxnOp = { put: string; value: string } | { delete: string } | { range: string; prefix?: boolean };

export interface TxnResult {
  revision: string;
  succeeded: boolean;
  /** The kvs of each range op, in op order (other ops contribute an empty list). */
  ranges: Kv[][];
}

function wireCompare(c: Compare): object {
  const key = b64(c.key);
  if ('createRevision' in c)
    return { target: 'CREATE', key, create_revision: c.createRevision, result: 'EQUAL' };
  if ('modRevision' in c) return { target: 'MOD', key, mod_revision: c.modRevision, result: 'EQUAL' };
  return { target: 'VALUE', key, value: b64(c.value), result: 'EQUAL' };
}

function wireOp(op: TxnOp): object {
  if ('put' in op) return { request_put: { key: b64(op.put), value: b64(op.value) } };
  if ('delete' in op) return { request_delete_range: { key: b64(op.delete) } };
  const range: Record<string, string> = { key: b64(op.range) };
  if (op.prefix) range.range_end = prefixEnd(op.range);
  return { request_range: range };
}

/** Typed KV calls; errors are the gateway's GatewayError. */
export class EtcdKv {
  readonly #gw: EtcdGateway;

  constructor(gateway: EtcdGateway) {
    this.#gw = gateway;
  }

  /** Equivalent to: `etcdctl get KEY [--prefix]` (linearizable). */
  async range(
    key: string,
    opts: { prefix?: boolean; signal?: AbortSignal } = {},
  ): Promise<{ revision: string; kvs: Kv[] }> {
    const body: Record<string, string> = { key: b64(key) };
    if (opts.prefix) body.range_end = prefixEnd(key);
    const res = await this.#gw.call<WireRange>('/v3/kv/range', body, opts.signal);
    return { revision: res.header?.revision ?? '0', kvs: (res.kvs ?? []).map(decodeKv) };
  }

  /**
   * Every key under `prefix`, `pageSize` keys per request, each page decoded and handed over before
   * the next is asked for: no answer holds more than one page (a 5000-node list is ~2 MB of JSON in
   * one answer; paged, ~200 KB). All pages are read at the first page's revision, so together they
   * are one consistent snapshot, as a single range would be. Should etcd compact that revision away
   * before the last page (gRPC 11), the read starts again at the newest revision and `onRestart`
   * says so, so that the caller drops the pages it had (at most PAGED_RESTARTS times).
   * Equivalent to: `etcdctl get PREFIX --prefix --limit N`, continued from after the last key.
   */
  async rangePages(
    prefix: string,
    opts: {
      pageSize?: number;
      signal?: AbortSignal;
      onPage: (kvs: Kv[]) => void;
      onRestart?: () => void;
    },
  ): Promise<{ revision: string }> {
    const pageSize = opts.pageSize ?? RANGE_PAGE_SIZE;
    const end = prefixEnd(prefix);
    for (let attempt = 0; ; attempt++) {
      let revision: string | undefined;
      let from = b64(prefix);
      try {
        for (;;) {
          const body: Record<string, string> = { key: from, range_end: end, limit: String(pageSize) };
          if (revision !== undefined) body.revision = revision;
          const res = await this.#gw.call<WireRange>('/v3/kv/range', body, opts.signal);
          revision ??= res.header?.revision ?? '0';
          const wire = res.kvs ?? [];
          const last = wire.at(-1)?.key;
          opts.onPage(wire.map(decodeKv));
          if (res.more !== true || last === undefined) return { revision };
          // The next page starts right after the last key: that key with a zero byte appended.
          from = Buffer.concat([Buffer.from(last, 'base64'), Buffer.from([0])]).toString('base64');
        }
      } catch (err) {
        const compacted =
          revision !== undefined && err instanceof GatewayError && err.grpcCode === GRPC_OUT_OF_RANGE;
        if (!compacted || attempt >= PAGED_RESTARTS) throw err;
        opts.onRestart?.();
      }
    }
  }

  /**
   * Equivalent to: `etcdctl txn` with the compares, then-ops and else-ops given. One of ranges only
   * is a read: the gateway may send it to another endpoint after one failed to answer it.
   */
  async txn(
    t: { compare: Compare[]; success: TxnOp[]; failure?: TxnOp[] },
    signal?: AbortSignal,
  ): Promise<TxnResult> {
    const failure = t.failure ?? [];
    const body = {
      compare: t.compare.map(wireCompare),
      success: t.success.map(wireOp),
      failure: failure.map(wireOp),
    };
    const readOnly = [...t.success, ...failure].every((op) => 'range' in op);
    const res = await this.#gw.call<WireTxn>('/v3/kv/txn', body, signal, { readOnly });
    return {
      revision: res.header?.revision ?? '0',
      succeeded: res.succeeded === true,
      ranges: (res.responses ?? []).map((r) => (r.response_range?.kvs ?? []).map(decodeKv)),
    };
  }
}
