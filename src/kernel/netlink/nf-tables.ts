/**
 * A synchronous nf_tables client over NETLINK_NETFILTER, for what changes per pod: elements of sets
 * that rules installed once (by `nft`, at agent start) look up. Adding or removing a pod's elements is
 * one batch in one datagram, committed by the kernel as one transaction; no process is spawned.
 */
import { NfnetlinkSocket, type NftBatchMessage } from './nfnetlink-socket.js';
import {
  type CountedSetElem,
  decodeCounterObj,
  decodeSetElemKeys,
  decodeSetElems,
  encodeObjDump,
  encodeSetElemList,
  encodeSetElemRanges,
  type NftCounter,
  type SetElem,
} from './nft-set-elem.js';
import { NLM_F_CREATE } from './uapi/netlink.js';
import {
  NFT_MSG_DELSETELEM,
  NFT_MSG_GETOBJ,
  NFT_MSG_GETSETELEM,
  NFT_MSG_NEWSETELEM,
  NFT_OBJECT_COUNTER,
} from './uapi/nf-tables.js';

/** Keys of one set. */
export interface SetKeys {
  set: string;
  keys: Uint8Array[];
}

/** Elements of one set, ranges allowed. */
export interface SetElems {
  set: string;
  elems: SetElem[];
}

/**
 * An attribute's length is 16 bits: a message's element list must stay under 64 KiB, so a big change
 * of one set is several messages (of the same batch). An element is at most 16 bytes of headers and
 * twice 8 + its key.
 */
const LIST_BYTES = 60_000;

function chunks(elems: readonly SetElem[]): SetElem[][] {
  if (elems.length === 0) return [];
  const first = elems[0] as SetElem;
  const per = Math.max(1, Math.floor(LIST_BYTES / (16 + 2 * (8 + first.key.length))));
  const out: SetElem[][] = [];
  for (let i = 0; i < elems.length; i += per) out.push(elems.slice(i, i + per));
  return out;
}

/** Deletes, then adds, as batch messages: each set's elements in chunks under the attribute limit. */
function changeMessages(
  family: number,
  table: string,
  change: { remove: readonly SetElems[]; add: readonly SetElems[] },
): NftBatchMessage[] {
  const msgs = (type: number, flags: number, groups: readonly SetElems[]) =>
    groups.flatMap((g) =>
      chunks(g.elems).map((elems) => ({
        type,
        flags,
        family,
        attrs: encodeSetElemRanges(table, g.set, elems),
      })),
    );
  return [
    ...msgs(NFT_MSG_DELSETELEM, 0, change.remove),
    ...msgs(NFT_MSG_NEWSETELEM, NLM_F_CREATE, change.add),
  ];
}

export class NfTables implements Disposable {
  readonly #sock: NfnetlinkSocket;

  private constructor(sock: NfnetlinkSocket) {
    this.#sock = sock;
  }

  /** Opens a client bound to the calling thread's current network namespace. */
  static open(options: { receiveTimeoutMs?: number } = {}): NfTables {
    return new NfTables(NfnetlinkSocket.open(options));
  }

  /**
   * Equivalent to: `nft add element FAMILY TABLE SET { KEY, ... }` for every set, in one transaction.
   * An element already there is no error.
   */
  addElements(family: number, table: string, groups: readonly SetKeys[]): void {
    this.#sock.batch(
      groups
        .filter((g) => g.keys.length > 0)
        .map((g) => ({
          type: NFT_MSG_NEWSETELEM,
          flags: NLM_F_CREATE,
          family,
          attrs: encodeSetElemList(table, g.set, g.keys),
        })),
    );
  }

  /**
   * Equivalent to: `nft delete element FAMILY TABLE SET { KEY, ... }` for every set, in one transaction.
   * Fails (ENOENT) and removes nothing when any element is missing.
   */
  deleteElements(family: number, table: string, groups: readonly SetKeys[]): void {
    this.#sock.batch(
      groups
        .filter((g) => g.keys.length > 0)
        .map((g) => ({
          type: NFT_MSG_DELSETELEM,
          flags: 0,
          family,
          attrs: encodeSetElemList(table, g.set, g.keys),
        })),
    );
  }

  /**
   * Equivalent to: `nft get element FAMILY TABLE SET { KEY, ... }`: throws ENOENT when one of them (or
   * the set, or the table) is missing.
   */
  getElements(family: number, table: string, set: string, keys: readonly Uint8Array[]): void {
    if (keys.length === 0) return;
    this.#sock.request(NFT_MSG_GETSETELEM, family, encodeSetElemList(table, set, keys));
  }

  /** Equivalent to: `nft list set FAMILY TABLE SET`: the keys of every element. */
  listElements(family: number, table: string, set: string): Uint8Array[] {
    return this.#sock
      .dump(NFT_MSG_GETSETELEM, family, encodeSetElemList(table, set, []))
      .flatMap((m) => decodeSetElemKeys(m.payload.subarray(4)).keys);
  }

  /**
   * Equivalent to: `nft -f -` with `delete element FAMILY TABLE SET { ... }` for each of `remove`, then
   * `add element ...` for each of `add`: one transaction, all of it or none. A removed element that is
   * missing fails the whole batch (ENOENT).
   */
  changeElements(
    family: number,
    table: string,
    change: { remove: readonly SetElems[]; add: readonly SetElems[] },
  ): void {
    this.#sock.batch(changeMessages(family, table, change));
  }

  /**
   * `changeElements` with the kernel's work on a worker thread (`NfnetlinkSocket.batchAsync`): for a
   * change that may take the kernel seconds, on a socket that nothing calls synchronously meanwhile.
   */
  changeElementsAsync(
    family: number,
    table: string,
    change: { remove: readonly SetElems[]; add: readonly SetElems[] },
  ): Promise<void> {
    return this.#sock.batchAsync(changeMessages(family, table, change));
  }

  /** Equivalent to: `nft list set FAMILY TABLE SET`: every element, with range ends and counters. */
  listSetElems(family: number, table: string, set: string): CountedSetElem[] {
    return this.#sock
      .dump(NFT_MSG_GETSETELEM, family, encodeSetElemList(table, set, []))
      .flatMap((m) => decodeSetElems(m.payload.subarray(4)));
  }

  /** Equivalent to: `nft list counters table FAMILY TABLE`. */
  counters(family: number, table: string): NftCounter[] {
    return this.#sock
      .dump(NFT_MSG_GETOBJ, family, encodeObjDump(table, NFT_OBJECT_COUNTER))
      .map((m) => decodeCounterObj(m.payload.subarray(4)))
      .filter((c): c is NftCounter => c !== undefined && c.table === table);
  }

  close(): void {
    this.#sock.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}
