/**
 * The Linux bridge's PolicyBackend (datapath/policy-backend.ts; issue 28, decision 45): the fixed
 * table (policy-table.ts) by `nft` at start, then every `apply` as the difference between the
 * elements installed and the elements wanted (policy-elements.ts), removed and added in ONE
 * NETLINK_NETFILTER batch, which the kernel commits as one transaction: a packet meets the old
 * elements or the new, never a mix. No process is spawned per change.
 *
 * What is installed is read back from the kernel at start (policy survives an agent restart and the
 * first `apply` diffs against it). Counters are the elements' own: each element is counted for one
 * rule (the first that allows its cell), a pod's isolation element for its denied packets.
 */
import { DatapathError } from '../../base/errors.js';
import type { NfTables, SetElems } from '../../kernel/netlink/nf-tables.js';
import { NflogSocket } from '../../kernel/netlink/nflog-socket.js';
import type { SetElem } from '../../kernel/netlink/nft-set-elem.js';
import type { NflogBind } from '../../kernel/netlink/nfulnl-message.js';
import type { Nft } from '../../kernel/nft.js';
import type { PodPolicy } from '../../policy/model.js';
import type { DeniedPacket, DeniedPacketLog, PolicyBackend, RuleCounters } from '../policy-backend.js';
import { deniedPacket } from './denied-packet.js';
import { type ElementOwner, policyElements } from './policy-elements.js';
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

export class NftPolicyBackend implements PolicyBackend {
  readonly #nft: Nft;
  readonly #nf: NfTables;
  /** Set -> element id -> element, as the kernel holds them. */
  #installed = new Map<string, Map<string, SetElem>>();
  /** Set -> element id -> the rule it counts for (known for what this backend applied). */
  #owners = new Map<string, Map<string, ElementOwner>>();

  readonly #openNflog: (bind: NflogBind) => NflogSocket;

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

  async start(): Promise<void> {
    await this.#nft.apply(policyTableScript());
    this.#readInstalled();
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

  async apply(pods: readonly PodPolicy[]): Promise<void> {
    if (this.#installed.size === 0) throw new DatapathError('policy: apply before start');
    const wanted = new Map<string, Map<string, SetElem>>(ALL_POLICY_SETS.map((s) => [s, new Map()]));
    const owners = new Map<string, Map<string, ElementOwner>>(ALL_POLICY_SETS.map((s) => [s, new Map()]));
    for (const e of policyElements(pods)) {
      const id = elemId(e);
      const set = wanted.get(e.set) as Map<string, SetElem>;
      if (set.has(id)) continue; // two pods with one address: the first one's
      set.set(id, strip(e));
      owners.get(e.set)?.set(id, e.owner);
    }
    try {
      this.#change(wanted);
    } catch (err) {
      // The kernel's sets are not what this backend believes (someone else changed them): read them
      // again and diff once more. A second failure is the caller's; the previous state stays in force.
      this.#readInstalled();
      try {
        this.#change(wanted);
      } catch (again) {
        throw new DatapathError(`policy: the nf_tables batch failed: ${String(again)}`, { cause: err });
      }
    }
    this.#installed = wanted;
    this.#owners = owners;
  }

  /** Removes what is installed and not wanted, adds what is wanted and not installed: one batch. */
  #change(wanted: Map<string, Map<string, SetElem>>): void {
    const remove: SetElems[] = [];
    const add: SetElems[] = [];
    for (const set of ALL_POLICY_SETS) {
      const have = this.#installed.get(set) ?? new Map<string, SetElem>();
      const want = wanted.get(set) as Map<string, SetElem>;
      remove.push({ set, elems: [...have].filter(([id]) => !want.has(id)).map(([, e]) => e) });
      add.push({ set, elems: [...want].filter(([id]) => !have.has(id)).map(([, e]) => e) });
    }
    this.#nf.changeElements(POLICY_FAMILY, POLICY_TABLE, { remove, add });
  }

  async counters(): Promise<RuleCounters[]> {
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

  async remove(): Promise<void> {
    await this.#nft.apply(policyDropScript());
    this.#installed = new Map();
    this.#owners = new Map();
  }
}

function strip(e: SetElem): SetElem {
  return e.keyEnd ? { key: e.key, keyEnd: e.keyEnd } : { key: e.key };
}
