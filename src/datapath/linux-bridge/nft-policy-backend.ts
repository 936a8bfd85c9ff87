/**
 * The Linux bridge's PolicyBackend (datapath/policy-backend.ts; issue 28, decision 45): the fixed
 * table (policy-table.ts) by `nft` at start, then every `apply` as the difference between the
 * elements installed and the elements wanted (policy-elements.ts), removed and added in ONE
 * NETLINK_NETFILTER batch, which the kernel commits as one transaction: a packet meets the old
 * elements or the new, never a mix. No process is spawned per change.
 *
 * Each pod's share is remembered with its signature (policy/pod-signature.ts): an `apply` generates
 * elements only for the pods whose signature changed, and the batch holds only their difference, so
 * a change of one pod costs that pod, not the node (decision 53). Every element's key starts with its
 * pod's address, so pods with distinct addresses have distinct elements; when two pods claim one
 * address (a stale status), or a batch fails, the apply falls back to the whole difference (below).
 *
 * What is installed is read back from the kernel at start (policy survives an agent restart and the
 * first `apply` diffs against it, as a whole). Counters are the elements' own: each element is counted for one
 * rule (the first that allows its cell), a pod's isolation element for its denied packets.
 *
 * The batch's `sendto`, inside which the kernel commits it (seconds for a big change of these interval
 * sets of concatenations, decision 53), runs on a worker thread (decision 54): the agent's CNI calls
 * and probes go on meanwhile. Calls on the backend are queued, one at a time: the socket carries one
 * batch and nothing else while it is in flight.
 */
import { DatapathError } from '../../base/errors.js';
import { parseIp } from '../../base/ip.js';
import type { NfTables, SetElems } from '../../kernel/netlink/nf-tables.js';
import { NflogSocket } from '../../kernel/netlink/nflog-socket.js';
import type { SetElem } from '../../kernel/netlink/nft-set-elem.js';
import type { NflogBind } from '../../kernel/netlink/nfulnl-message.js';
import type { Nft } from '../../kernel/nft.js';
import type { PodPolicy } from '../../policy/model.js';
import { podPolicySignature } from '../../policy/pod-signature.js';
import type { DeniedPacket, DeniedPacketLog, PolicyBackend, RuleCounters } from '../policy-backend.js';
import { deniedPacket } from './denied-packet.js';
import { type CellCache, type ElementOwner, type PolicyElement, policyElements } from './policy-elements.js';
import {
  ALL_POLICY_SETS,
  DENY_LOG_GROUP,
  DENY_LOG_SNAPLEN,
  POLICY_FAMILY,
  POLICY_TABLE,
  policyDropScript,
  policyTableScript,
} from './policy-table.js';

const hex = (b: Uint8Array | undefined) =>
  b ? Buffer.from(b.buffer, b.byteOffset, b.length).toString('hex') : '';
const elemId = (e: SetElem) => `${hex(e.key)}-${hex(e.keyEnd)}`;

/** One element of a pod's share: its set, id, what the kernel holds (key, key end) and whose it is. */
interface PodElem {
  set: string;
  id: string;
  elem: SetElem;
  owner: ElementOwner;
}

/** What one pod has installed, and the signature of the `PodPolicy` it came from. */
interface PodShare {
  signature: string;
  elems: PodElem[];
}

function shareOf(pod: PodPolicy, signature: string, cells: CellCache): PodShare {
  return {
    signature,
    elems: policyElements([pod], cells).map((e) => ({
      set: e.set,
      id: elemId(e),
      elem: strip(e),
      owner: e.owner,
    })),
  };
}

export class NftPolicyBackend implements PolicyBackend {
  readonly #nft: Nft;
  readonly #nf: NfTables;
  /** Set -> element id -> element, as the kernel holds them. */
  #installed = new Map<string, Map<string, SetElem>>();
  /** Set -> element id -> the rule it counts for (known for what this backend applied). */
  #owners = new Map<string, Map<string, ElementOwner>>();
  /**
   * Pod -> its share, as installed by the last apply; undefined until an apply installed the whole
   * (at start, what the kernel holds is not known per pod) and after one with a shared address.
   */
  #shares: Map<string, PodShare> | undefined;

  readonly #openNflog: (bind: NflogBind) => NflogSocket;
  /** Settles when the last queued call has; never rejects. */
  #tail: Promise<void> = Promise.resolve();

  /**
   * `nft` and `nf` act in the node's network namespace; so must `openNflog` (by default the calling
   * thread's namespace, the agent's own).
   */
  constructor(nft: Nft, nf: NfTables, opts: { openNflog?: (bind: NflogBind) => NflogSocket } = {}) {
    this.#nft = nft;
    this.#nf = nf;
    this.#openNflog = opts.openNflog ?? ((bind) => NflogSocket.open(bind));
  }

  /**
   * The deny chains' NFLOG group (policy-table.ts), bound on a socket of its own: each read takes at
   * most 64 of the kernel's datagrams, so a flood costs a bounded amount of work per read (the rest
   * waits in the socket's buffer, and what overflows it is lost and counted).
   */
  openDenyLog(): DeniedPacketLog {
    const sock = this.#openNflog({
      group: DENY_LOG_GROUP,
      copyRange: DENY_LOG_SNAPLEN,
      queueThreshold: 1,
      flushTimeout: 10,
    });
    return {
      read: () => {
        const got = sock.drain(64);
        const packets: DeniedPacket[] = [];
        for (const p of got.packets) {
          const d = deniedPacket(p);
          if (d) packets.push(d);
        }
        return { packets, overruns: got.overruns };
      },
      close: () => sock.close(),
    };
  }

  start(): Promise<void> {
    return this.#exclusive(() => this.#start());
  }

  async #start(): Promise<void> {
    await this.#nft.apply(policyTableScript());
    this.#readInstalled();
    this.#shares = undefined;
  }

  /** What the kernel's sets hold now. */
  #readInstalled(): void {
    this.#installed = new Map(
      ALL_POLICY_SETS.map((set) => [
        set,
        new Map(this.#nf.listSetElems(POLICY_FAMILY, POLICY_TABLE, set).map((e) => [elemId(e), strip(e)])),
      ]),
    );
  }

  apply(pods: readonly PodPolicy[]): Promise<void> {
    return this.#exclusive(() => this.#apply(pods));
  }

  /**
   * One at a time: an apply's batch runs on a worker thread (the kernel may take seconds over a big
   * change of an interval set; the agent's event loop goes on), and nothing else may use the socket
   * meanwhile (counters, start, remove wait for it).
   */
  #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.#tail.then(fn, fn);
    this.#tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }

  async #apply(pods: readonly PodPolicy[]): Promise<void> {
    if (this.#installed.size === 0) throw new DatapathError('policy: apply before start');
    // Each pod's share: the one installed if its signature is unchanged, else generated now (which
    // throws, before anything is changed, on what the kernel could not hold).
    const next = new Map<string, PodShare>();
    const cells: CellCache = new Map();
    const addresses = new Set<string>();
    let shared = false;
    for (const pod of pods) {
      const key = `${pod.namespace}/${pod.name}`;
      const signature = podPolicySignature(pod);
      const before = this.#shares?.get(key);
      if (next.has(key)) shared = true;
      for (const ip of pod.ips) {
        const v = parseIp(ip);
        const a = v ? `${v.family}/${v.value}` : ip;
        if (addresses.has(a)) shared = true;
        addresses.add(a);
      }
      next.set(key, before?.signature === signature ? before : shareOf(pod, signature, cells));
    }
    if (!shared && this.#shares !== undefined) {
      try {
        await this.#changePods(next);
        this.#shares = next;
        return;
      } catch {
        // The kernel's sets are not what this backend believes: the whole difference, below.
      }
    }
    await this.#applyWhole(shared ? policyElements(pods, cells) : [...next.values()].flatMap((p) => p.elems));
    this.#shares = shared ? undefined : next;
  }

  /** Removes the pods' elements that are gone or changed and adds the new: one batch, the difference only. */
  async #changePods(next: Map<string, PodShare>): Promise<void> {
    const remove: PodElem[] = [];
    const add: PodElem[] = [];
    const before = this.#shares ?? new Map<string, PodShare>();
    for (const [key, old] of before) {
      const now = next.get(key);
      if (now === old) continue;
      const keep = new Set(now?.elems.map((e) => `${e.set} ${e.id}`));
      for (const e of old.elems) if (!keep.has(`${e.set} ${e.id}`)) remove.push(e);
    }
    for (const [key, now] of next) {
      const old = before.get(key);
      if (old === now) continue;
      const had = new Set(old?.elems.map((e) => `${e.set} ${e.id}`));
      for (const e of now.elems) if (!had.has(`${e.set} ${e.id}`)) add.push(e);
    }
    if (remove.length > 0 || add.length > 0) {
      const bySet = (list: PodElem[]): SetElems[] =>
        ALL_POLICY_SETS.map((set) => ({ set, elems: list.filter((e) => e.set === set).map((e) => e.elem) }));
      await this.#nf.changeElementsAsync(POLICY_FAMILY, POLICY_TABLE, {
        remove: bySet(remove),
        add: bySet(add),
      });
    }
    for (const e of remove) {
      this.#installed.get(e.set)?.delete(e.id);
      this.#owners.get(e.set)?.delete(e.id);
    }
    for (const e of add) this.#installed.get(e.set)?.set(e.id, e.elem);
    // Whose each element is, for every pod that changed: an element that stayed may count for another
    // rule now (a policy renamed, or another one sorted first with the same cells).
    for (const [key, now] of next) {
      if (before.get(key) === now) continue;
      for (const e of now.elems) this.#owners.get(e.set)?.set(e.id, e.owner);
    }
  }

  /** Every element wanted against every element installed (the first pod's where two share an address). */
  async #applyWhole(elements: ReadonlyArray<PolicyElement | PodElem>): Promise<void> {
    const wanted = new Map<string, Map<string, SetElem>>(ALL_POLICY_SETS.map((s) => [s, new Map()]));
    const owners = new Map<string, Map<string, ElementOwner>>(ALL_POLICY_SETS.map((s) => [s, new Map()]));
    for (const e of elements) {
      const id = 'id' in e ? e.id : elemId(e);
      const set = wanted.get(e.set) as Map<string, SetElem>;
      if (set.has(id)) continue; // two pods with one address: the first one's
      set.set(id, 'elem' in e ? e.elem : strip(e));
      owners.get(e.set)?.set(id, e.owner);
    }
    try {
      await this.#change(wanted);
    } catch (err) {
      // The kernel's sets are not what this backend believes (someone else changed them): read them
      // again and diff once more. A second failure is the caller's; the previous state stays in force.
      this.#readInstalled();
      try {
        await this.#change(wanted);
      } catch (again) {
        this.#shares = undefined;
        throw new DatapathError(`policy: the nf_tables batch failed: ${String(again)}`, { cause: err });
      }
    }
    this.#installed = wanted;
    this.#owners = owners;
  }

  /** Removes what is installed and not wanted, adds what is wanted and not installed: one batch. */
  async #change(wanted: Map<string, Map<string, SetElem>>): Promise<void> {
    const remove: SetElems[] = [];
    const add: SetElems[] = [];
    for (const set of ALL_POLICY_SETS) {
      const have = this.#installed.get(set) ?? new Map<string, SetElem>();
      const want = wanted.get(set) as Map<string, SetElem>;
      remove.push({ set, elems: [...have].filter(([id]) => !want.has(id)).map(([, e]) => e) });
      add.push({ set, elems: [...want].filter(([id]) => !have.has(id)).map(([, e]) => e) });
    }
    await this.#nf.changeElementsAsync(POLICY_FAMILY, POLICY_TABLE, { remove, add });
  }

  counters(): Promise<RuleCounters[]> {
    return this.#exclusive(async () => this.#counters());
  }

  #counters(): RuleCounters[] {
    const sums = new Map<string, RuleCounters>();
    for (const set of ALL_POLICY_SETS) {
      const owners = this.#owners.get(set);
      if (!owners) continue;
      for (const e of this.#nf.listSetElems(POLICY_FAMILY, POLICY_TABLE, set)) {
        const owner = owners.get(elemId(e));
        if (!owner) continue;
        const k = `${owner.pod}\n${owner.rule}`;
        const c = sums.get(k) ?? { rule: owner.rule, pod: owner.pod, packets: 0n, bytes: 0n };
        c.packets += e.packets ?? 0n;
        c.bytes += e.bytes ?? 0n;
        sums.set(k, c);
      }
    }
    return [...sums.values()];
  }

  remove(): Promise<void> {
    return this.#exclusive(() => this.#remove());
  }

  async #remove(): Promise<void> {
    await this.#nft.apply(policyDropScript());
    this.#installed = new Map();
    this.#owners = new Map();
    this.#shares = undefined;
  }
}

function strip(e: SetElem): SetElem {
  return e.keyEnd ? { key: e.key, keyEnd: e.keyEnd } : { key: e.key };
}
