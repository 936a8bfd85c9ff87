/**
 * The message exchanges an OpenflowConnection runs, each as the messages it sends and what it does
 * with the messages routed back to it by xid: request/reply, multipart, a batch closed by a
 * barrier, and a bundle. The connection (connection.ts) owns the socket, xids, queueing and
 * timeouts; an exchange only sends through its `Exchange` handle and settles it.
 */
import { DatapathError } from '../../../base/errors.js';
import { encodeBundleAdd, encodeBundleCtrl, OFPBCT } from './bundle.js';
import type { FailedRequest, OpenflowError } from './error-msg.js';
import { OFP10_VERSION, OFP13_VERSION, OFPT10, OFPT13, type OfpHeader } from './header.js';
import { decodeMultipartReply, encodeMultipartRequest, OFPMPF_REPLY_MORE } from './multipart.js';

export interface OutgoingMessage {
  type: number;
  body: Uint8Array;
}

/** What an exchange uses to send and to settle; given by the connection. */
export interface Exchange<R> {
  /** Set by the exchange: each message routed to it (by one of its xids). */
  handle: (header: OfpHeader, body: Buffer) => void;
  /** A fresh xid routed to this exchange. */
  allocate: () => number;
  write: (type: number, xid: number, body?: Uint8Array) => void;
  /** allocate + write; returns the xid. */
  send: (type: number, body?: Uint8Array) => number;
  resolve: (value: R) => void;
  reject: (err: Error) => void;
}

/** What an exchange needs of its connection. */
export interface ExchangeContext {
  version: number;
  types: VersionTypes;
  /** The OpenflowError for an OFPT_ERROR body answering `request`. */
  error: (body: Buffer, request: FailedRequest, context: string) => OpenflowError;
}

/** Types whose numbers differ between the versions podwire speaks. */
export interface VersionTypes {
  barrierRequest: number;
  barrierReply: number;
  multipartRequest: number;
  multipartReply: number;
}

export const VERSION_TYPES: Record<number, VersionTypes> = {
  [OFP13_VERSION]: {
    barrierRequest: OFPT13.BARRIER_REQUEST,
    barrierReply: OFPT13.BARRIER_REPLY,
    multipartRequest: OFPT13.MULTIPART_REQUEST,
    multipartReply: OFPT13.MULTIPART_REPLY,
  },
  [OFP10_VERSION]: {
    barrierRequest: OFPT10.BARRIER_REQUEST,
    barrierReply: OFPT10.BARRIER_REPLY,
    multipartRequest: OFPT10.STATS_REQUEST,
    multipartReply: OFPT10.STATS_REPLY,
  },
};

/** HELLO, ERROR, ECHO, EXPERIMENTER (1.0: VENDOR) and FEATURES share their numbers in 1.0 and 1.3. */
const T = OFPT13;

/** One request, the one reply with its xid. */
export function requestReply(
  ex: Exchange<Buffer>,
  ctx: ExchangeContext,
  type: number,
  body?: Uint8Array,
): void {
  const xid = ex.send(type, body);
  ex.handle = (h, b) => {
    if (h.type === T.ERROR) ex.reject(ctx.error(b, { type, xid }, 'request'));
    else ex.resolve(b);
  };
}

/** A multipart request; the replies' bodies up to the one without OFPMPF_REPLY_MORE. */
export function multipartReplies(
  ex: Exchange<Buffer[]>,
  ctx: ExchangeContext,
  mpType: number,
  body: Uint8Array | undefined,
  flags: number,
): void {
  const { multipartRequest, multipartReply } = ctx.types;
  const xid = ex.send(multipartRequest, encodeMultipartRequest(ctx.version, mpType, body, flags));
  const parts: Buffer[] = [];
  ex.handle = (h, b) => {
    if (h.type === T.ERROR) {
      ex.reject(ctx.error(b, { type: multipartRequest, xid }, `multipart ${mpType}`));
      return;
    }
    if (h.type !== multipartReply) return;
    const reply = decodeMultipartReply(ctx.version, b);
    parts.push(reply.body);
    if ((reply.flags & OFPMPF_REPLY_MORE) === 0) ex.resolve(parts);
  };
}

/** The messages, then a BARRIER_REQUEST; settles at the BARRIER_REPLY with the first ERROR, if any. */
export function barrierBatch(ex: Exchange<void>, ctx: ExchangeContext, messages: OutgoingMessage[]): void {
  const { barrierRequest, barrierReply } = ctx.types;
  const index = new Map<number, number>();
  for (const [i, m] of messages.entries()) index.set(ex.send(m.type, m.body), i);
  const barrierXid = ex.send(barrierRequest);
  let first: OpenflowError | undefined;
  ex.handle = (h, b) => {
    if (h.type === T.ERROR) {
      const i = index.get(h.xid);
      const request: FailedRequest =
        i === undefined
          ? { type: barrierRequest, xid: h.xid }
          : { type: (messages[i] as OutgoingMessage).type, xid: h.xid, index: i };
      const err = ctx.error(b, request, 'transact');
      if (i === undefined) ex.reject(first ?? err);
      else if (!first || (first.request.index ?? 0) > i) first = err;
      return;
    }
    if (h.xid === barrierXid && h.type === barrierReply) {
      if (first) ex.reject(first);
      else ex.resolve();
    }
  };
}

/**
 * One bundle (ONF EXT-230 on 1.3; bundle.ts): OPEN, ADD each, CLOSE, then COMMIT when no ADD drew
 * an ERROR, else DISCARD; rejects with the first failing message's OpenflowError (index included).
 *
 * Why CLOSE before COMMIT: OVS checks each inner message when it is added, answers a bad one with
 * an ERROR (the add's xid) and leaves the bundle open without it, so a COMMIT right after the ADDs
 * would apply the valid rest of an "atomic" bundle (seen with OVS 3.1). Replies come in order, so
 * at CLOSE_REPLY every ADD's error is in. Errors found only at commit (e.g. OFPFMFC_OVERLAP) come
 * with the inner message's xid before the commit's own OFPBFC_MSG_FAILED, and OVS then reverts
 * the whole bundle.
 */
export function bundleCommit(
  ex: Exchange<void>,
  ctx: ExchangeContext,
  id: number,
  flags: number,
  messages: OutgoingMessage[],
): void {
  const ctrl = (type: number) => ex.send(T.EXPERIMENTER, encodeBundleCtrl(id, type, flags));
  const openXid = ctrl(OFPBCT.OPEN_REQUEST);
  const index = new Map<number, number>();
  for (const [i, m] of messages.entries()) {
    const xid = ex.allocate();
    index.set(xid, i);
    ex.write(T.EXPERIMENTER, xid, encodeBundleAdd(id, flags, ctx.version, xid, m.type, m.body));
  }
  const closeXid = ctrl(OFPBCT.CLOSE_REQUEST);
  let openFailed: OpenflowError | undefined;
  /** The failing message with the lowest index. */
  let first: OpenflowError | undefined;
  let failure: OpenflowError | undefined;
  let commitXid: number | undefined;
  let discardXid: number | undefined;
  const ctrlError = (b: Buffer, xid: number, what: string) =>
    ctx.error(b, { type: T.EXPERIMENTER, xid }, `bundle ${id} ${what}`);
  ex.handle = (h, b) => {
    const isError = h.type === T.ERROR;
    const i = index.get(h.xid);
    if (i !== undefined) {
      // An ADD's ERROR: its inner message failed (at add time, or at commit with its own xid).
      if (!isError) return;
      const type = (messages[i] as OutgoingMessage).type;
      const err = ctx.error(b, { type, xid: h.xid, index: i }, `bundle ${id}`);
      if (!first || (first.request.index ?? 0) > i) first = err;
      return;
    }
    if (h.xid === openXid) {
      if (isError) openFailed = ctrlError(b, h.xid, 'open');
      return;
    }
    if (h.xid === closeXid) {
      failure = openFailed ?? first ?? (isError ? ctrlError(b, h.xid, 'close') : undefined);
      if (!failure) commitXid = ctrl(OFPBCT.COMMIT_REQUEST);
      else if (openFailed) ex.reject(failure);
      // Open (or closed) on the switch: discard it, and report the failure whatever the answer.
      else discardXid = ctrl(OFPBCT.DISCARD_REQUEST);
      return;
    }
    if (h.xid === commitXid) {
      if (isError) ex.reject(first ?? ctrlError(b, h.xid, 'commit'));
      else if (first) ex.reject(first);
      else ex.resolve();
      return;
    }
    if (h.xid === discardXid) ex.reject(failure ?? new DatapathError(`bundle ${id} discarded`));
  };
}
