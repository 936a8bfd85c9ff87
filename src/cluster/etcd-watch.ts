/**
 * The node watch over etcd's streaming `/v3/watch`, made gap-free across failures:
 *
 * - `revision` is the last store revision whose events were all delivered; every (re)connection asks
 *   for `revision + 1`, so nothing is lost or repeated when the stream breaks;
 * - the stream breaks on etcd restart (connection closed) and, when etcd hangs (paused, partitioned),
 *   the health monitor's probe times out and the health flip aborts the silent stream;
 * - when etcd has compacted `revision + 1` away, the watch lists afresh and emits the difference
 *   from what it had delivered (`known`), then watches from the list's revision;
 * - reconnects wait with exponential backoff (capped), cut short when the health comes back;
 * - with several endpoints, a stream whose endpoint failed (`failover`, etcd-gateway.ts) reopens on the
 *   gateway's preferred endpoint without marking the store down: only a reconnection that finds no
 *   endpoint answering does.
 *
 * Signals: the watch's own stop and each attempt's are AbortControllers fed by listeners that are
 * removed when the watch (the attempt) ends; none is made with AbortSignal.any from the store's
 * long-lived signal, which on Node 20 would keep every combined signal referenced (nodejs/node#55351).
 */
import type { Backoff } from './backoff.js';
import { pause } from './backoff.js';
import { GatewayError } from './etcd-answer.js';
import type { EtcdGateway } from './etcd-gateway.js';
import { b64, decodeKv, type EtcdKeys, type Kv, prefixEnd, type WireHeader, type WireKv } from './etcd-kv.js';
import type { HealthState } from './health.js';
import { diffNodes } from './node-record.js';
import {
  type NodeEvent,
  type NodeList,
  type NodeRecord,
  type StoredNode,
  storeError,
  type WatchOptions,
} from './store.js';

interface WireWatchResponse {
  header?: WireHeader;
  created?: boolean;
  canceled?: boolean;
  compact_revision?: string;
  cancel_reason?: string;
  /** More of this response follows in the next message (asked for with `fragment: true`). */
  fragment?: boolean;
  events?: { type?: 'PUT' | 'DELETE'; kv?: WireKv }[];
}

export interface WatchContext {
  gateway: EtcdGateway;
  keys: EtcdKeys;
  health: HealthState;
  /** Aborts when the store closes. */
  closed: AbortSignal;
  backoff: () => Backoff;
  /** The store's own list (decodes and validates records). */
  list(signal: AbortSignal): Promise<NodeList>;
  /** A node record from a key, or undefined when the value is invalid (already reported). */
  decode(kv: Kv): NodeRecord | undefined;
  where: string;
}

export async function* watchNodes(
  ctx: WatchContext,
  opts: WatchOptions,
): AsyncGenerator<NodeEvent, void, undefined> {
  const stopper = new AbortController();
  const onStop = (): void => stopper.abort();
  for (const s of [opts.signal, ctx.closed]) {
    if (s.aborted) stopper.abort();
    else s.addEventListener('abort', onStop, { once: true });
  }
  try {
    yield* watchUntil(ctx, opts, stopper.signal);
  } finally {
    opts.signal.removeEventListener('abort', onStop);
    ctx.closed.removeEventListener('abort', onStop);
  }
}

async function* watchUntil(
  ctx: WatchContext,
  opts: WatchOptions,
  stop: AbortSignal,
): AsyncGenerator<NodeEvent, void, undefined> {
  const known = new Map<string, StoredNode>((opts.since?.nodes ?? []).map((s) => [s.node.name, s]));
  /** Invariant: every event up to and including this revision has been yielded. */
  let revision = opts.since === undefined ? undefined : parseRevision(opts.since.revision, ctx.where);
  const backoff = ctx.backoff();

  while (!stop.aborted) {
    const attempt = new AbortController();
    // A stream to a hung etcd stays open and silent: the health flip is what ends it.
    const unsubscribe = ctx.health.onChange((h) => {
      if (!h.ok) attempt.abort();
    });
    const onStop = (): void => attempt.abort();
    stop.addEventListener('abort', onStop, { once: true });
    const signal = attempt.signal;
    let failure: unknown;
    try {
      if (revision === undefined) {
        // First start without `since`, or history compacted: list, emit the difference, watch after it.
        const list = await ctx.list(signal);
        const events = diffNodes(known, list.nodes, list.revision);
        revision = BigInt(list.revision);
        backoff.reset();
        yield* events;
        continue;
      }
      let cursor: bigint = revision;
      /** The highest revision delivered by the fragments of a response not yet complete. */
      let fragmentLast: bigint | undefined;
      let relist = false;
      const body = {
        create_request: {
          key: b64(ctx.keys.nodes),
          range_end: prefixEnd(ctx.keys.nodes),
          start_revision: String(cursor + 1n),
          progress_notify: true,
          // A response larger than etcd's request limit plus 512 KiB (2 MiB by default) comes in
          // fragments instead of one message of any size: catching up after a long outage, etcd
          // batches up to 1000 revisions into one response (decision 23).
          fragment: true,
        },
      };
      for await (const message of ctx.gateway.stream('/v3/watch', body, signal)) {
        const m = message as { result?: WireWatchResponse; error?: { message?: string } };
        if (m.error !== undefined || m.result === undefined) {
          const why = m.error?.message ?? 'empty message';
          throw new GatewayError(`${ctx.where}: watch: ${why}`, { unreachable: true });
        }
        const r = m.result;
        if (r.compact_revision !== undefined && r.compact_revision !== '0') {
          relist = true;
          break;
        }
        if (r.canceled) {
          const reason = r.cancel_reason ?? '';
          // The token expired between calls: renew it on the next attempt (etcd-gateway.ts).
          const unauthenticated = /code = Unauthenticated/.test(reason);
          if (unauthenticated) ctx.gateway.forgetToken();
          throw new GatewayError(`${ctx.where}: watch canceled: ${reason}`, {
            unreachable: false,
            rejected: !unauthenticated && /code = (InvalidArgument|PermissionDenied)/.test(reason),
          });
        }
        if (r.created) {
          ctx.health.markOk();
          backoff.reset();
          continue;
        }
        const events = r.events ?? [];
        if (events.length === 0) {
          // A progress notification: etcd has nothing for us up to its revision.
          const at = BigInt(r.header?.revision ?? '0');
          if (at > cursor) cursor = at;
        }
        let last: bigint = fragmentLast ?? cursor;
        for (const e of events) {
          const kv = decodeKv(e.kv ?? {});
          const at = BigInt(kv.modRevision);
          if (at <= cursor) continue;
          if (at > last) last = at;
          const event = apply(ctx, known, kv, e.type === 'DELETE');
          if (event !== undefined) yield event;
        }
        // Whole responses only: etcd never splits one revision's events across responses, but a
        // fragment may end inside a revision. Until the last fragment the cursor stays, so a stream
        // broken between fragments resumes before that revision: its events already delivered come
        // again, as the same puts and deletes (harmless: a put of the same record changes nothing,
        // a delete of a node already gone emits nothing).
        if (r.fragment === true) {
          fragmentLast = last;
          continue;
        }
        fragmentLast = undefined;
        cursor = last;
        revision = cursor;
      }
      if (relist)
        revision = undefined; // list afresh on the next turn
      else if (attempt.signal.aborted && !stop.aborted)
        failure = `${ctx.where}: etcd stopped answering the watch`;
      else if (!stop.aborted) failure = `${ctx.where}: watch stream ended`;
    } catch (err) {
      failure = err;
    } finally {
      unsubscribe();
      stop.removeEventListener('abort', onStop);
    }
    if (stop.aborted) return;
    if (failure === undefined) continue;
    // A failover: the next endpoint is tried after the pause; the store is not known to be down.
    const storeDown =
      failure instanceof GatewayError ? (failure.unreachable && !failure.failover) || failure.rejected : true;
    if (storeDown) {
      ctx.health.markDown(failure instanceof Error ? failure.message : String(failure));
    }
    await pause(backoff.next(), stop, ctx.health);
  }
}

function parseRevision(text: string, where: string): bigint {
  if (typeof text !== 'string' || !/^[0-9]{1,19}$/.test(text)) {
    throw storeError(`${where}: watchNodes: since.revision ${JSON.stringify(text)} is not an etcd revision`);
  }
  return BigInt(text);
}

/** Applies one etcd event to `known` and returns the node event to deliver, if any. */
function apply(
  ctx: WatchContext,
  known: Map<string, StoredNode>,
  kv: Kv,
  deleted: boolean,
): NodeEvent | undefined {
  const name = kv.key.slice(ctx.keys.nodes.length);
  const before = known.get(name);
  const node = deleted ? undefined : ctx.decode(kv);
  if (node === undefined) {
    // Deleted, or overwritten with something invalid: either way the node is gone for consumers.
    if (before === undefined) return undefined;
    known.delete(name);
    return { type: 'delete', node: before.node, revision: kv.modRevision };
  }
  known.set(name, { node, version: kv.modRevision });
  return { type: 'put', node, version: kv.modRevision, revision: kv.modRevision };
}
