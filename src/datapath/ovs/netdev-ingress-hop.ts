/**
 * The checksum hop on OVS's kernel datapath (decision 32). On the Linux bridge a pod's host veth
 * redirects its ingress to the node's IFB with tc (checksum-ifb.ts); on an OVS port tc ingress is
 * ovs-vswitchd's (its ingress policing deletes the qdisc at attach and at every restart). nftables'
 * netdev ingress hook runs right after tc ingress and before the device's rx_handler, where OVS's
 * kernel datapath takes the frame, and ovs-vswitchd never touches it. So each pod port gets a base
 * chain on its host veth that forwards every frame from the pod to the node's IFB (`fwd to`, which
 * records that it came from ingress, as act_mirred does). The IFB, with transmit checksumming off,
 * completes every checksum the pod left pending (`validate_xmit_skb`) and hands the frame back to the
 * host veth's receive path, marked to skip the ingress hooks this time (`tc_skip_classify`): it goes
 * on to OVS, whose guard flows then judge the bytes as they will travel. The pod cannot undo any of
 * it: the chain and the IFB are in the node's namespace.
 *
 * Not on OVS's userspace datapath: its packet sockets see a frame before this hook; its pods' frames
 * are forwarded unfinished (decision 8).
 */
import { CheckFailedError, DatapathError } from '../../base/errors.js';
import type { Rtnetlink } from '../../kernel/netlink/rtnetlink.js';
import type { Nft } from '../../kernel/nft.js';
import { CHECKSUM_IFB, ensureChecksumIfb } from '../checksum-ifb.js';

export const HOP_TABLE = 'podwire_csum';

/**
 * A chain is named after its host veth: nft takes a chain's name unquoted, so it must be one of its
 * words (a letter, `_` or `.`, then letters, digits, `/`, `-`, `_`, `.`). podwire's host veths are.
 */
const CHAIN_NAME = /^[A-Za-z_.][A-Za-z0-9/_.-]*$/;

export class NetdevIngressHop {
  readonly #nl: Rtnetlink;
  readonly #nft: Nft;
  readonly #ifb: string;

  constructor(nl: Rtnetlink, nft: Nft, ifb = CHECKSUM_IFB) {
    this.#nl = nl;
    this.#nft = nft;
    this.#ifb = ifb;
  }

  /**
   * The node's IFB, made or adopted, and the table; chains whose host veth is gone are removed (a
   * kernel that keeps a chain after its device would otherwise collect them; newer kernels may).
   */
  async start(mtu: number): Promise<void> {
    ensureChecksumIfb(this.#nl, this.#ifb, mtu);
    await this.#nft.apply(`add table netdev ${HOP_TABLE}\n`);
    const stale = (await this.#chains()).filter(
      (c) => CHAIN_NAME.test(c.name) && this.#nl.linkByName(c.name) === undefined,
    );
    if (stale.length) await this.#nft.apply(`${stale.flatMap((c) => dropChainLines(c.name)).join('\n')}\n`);
  }

  /**
   * Equivalent to: `nft add chain netdev podwire_csum HOSTVETH '{ type filter hook ingress device
   * HOSTVETH priority -500; }'` with the one rule `fwd to "podwire-csum0"`, replacing any rules it
   * had, in one transaction. Before the veth comes up, so that no frame of the pod reaches OVS
   * without it.
   */
  async redirect(hostIfname: string): Promise<void> {
    const chain = chainName(hostIfname);
    try {
      await this.#nft.apply(
        [
          `add table netdev ${HOP_TABLE}`,
          `add chain netdev ${HOP_TABLE} ${chain} { type filter hook ingress device ${JSON.stringify(hostIfname)} priority -500; policy accept; }`,
          `flush chain netdev ${HOP_TABLE} ${chain}`,
          `add rule netdev ${HOP_TABLE} ${chain} fwd to ${JSON.stringify(this.#ifb)}`,
          '',
        ].join('\n'),
      );
    } catch (err) {
      // nft's own words first: a missing binary or a timeout is not a missing kernel module.
      throw new DatapathError(
        `cannot forward the ingress of ${hostIfname} to ${this.#ifb}: ${err instanceof Error ? err.message : String(err)} (the kernel needs nftables' netdev family and nft_fwd_netdev)`,
        { cause: err },
      );
    }
  }

  /**
   * Equivalent to: `nft delete chain netdev podwire_csum HOSTVETH`; nothing to do when it is gone (or
   * when the name is one no chain can have).
   */
  async remove(hostIfname: string): Promise<void> {
    if (!CHAIN_NAME.test(hostIfname)) return;
    await this.#nft.apply([`add table netdev ${HOP_TABLE}`, ...dropChainLines(hostIfname), ''].join('\n'));
  }

  /** Throws ERR_CHECK_FAILED, naming the host veth, when its frames do not pass the hop. */
  async check(hostIfname: string): Promise<void> {
    const chain = (await this.#chains()).find((c) => c.name === hostIfname);
    const fwd = `fwd to ${JSON.stringify(this.#ifb)}`;
    const why =
      chain === undefined
        ? 'has no chain'
        : chain.dev !== hostIfname || chain.hook !== 'ingress'
          ? `has a chain hooked at ${chain.hook ?? 'nothing'} of ${chain.dev ?? 'no device'}`
          : chain.rules.length !== 1 || chain.rules[0] !== fwd
            ? `has a chain whose rules are not the one forward: ${chain.rules.join(' ')}`
            : undefined;
    if (why)
      throw new CheckFailedError(
        `host veth ${hostIfname} ${why} in netdev ${HOP_TABLE}: its frames do not pass ${this.#ifb} (pending checksums would be completed after the guard flows)`,
      );
  }

  /** The table's chains with their hook and rules, as `nft list table` gives them. */
  async #chains(): Promise<HopChain[]> {
    let out: string;
    try {
      out = await this.#nft.run(['list', 'table', 'netdev', HOP_TABLE]);
    } catch (err) {
      if (/No such file or directory/.test(String(err))) return [];
      throw err;
    }
    return parseHopTable(out);
  }
}

export interface HopChain {
  name: string;
  hook?: string;
  dev?: string;
  /** Each rule as `nft` prints it. */
  rules: string[];
}

function chainName(hostIfname: string): string {
  if (!CHAIN_NAME.test(hostIfname))
    throw new DatapathError(`host veth name ${JSON.stringify(hostIfname)} is not one word`);
  return hostIfname;
}

function dropChainLines(name: string): string[] {
  const chain = chainName(name);
  return [`add chain netdev ${HOP_TABLE} ${chain}`, `delete chain netdev ${HOP_TABLE} ${chain}`];
}

/**
 * Chains and rules from `nft list table netdev podwire_csum` (its JSON form leaves out a netdev
 * chain's device in nft 1.0.6).
 */
export function parseHopTable(text: string): HopChain[] {
  const chains: HopChain[] = [];
  let chain: HopChain | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    const head = /^chain (\S+) \{$/.exec(line);
    if (head) {
      chain = { name: head[1] as string, rules: [] };
      chains.push(chain);
      continue;
    }
    if (!chain || line === '' || line === '}') continue;
    const hook = /^type \w+ hook (\w+)(?: devices? = \{ ([^}]*) \}| device "([^"]*)")?.*;/.exec(line);
    if (hook) {
      chain.hook = hook[1] as string;
      const dev = hook[3] ?? hook[2]?.replace(/"/g, '').replace(/\s/g, '');
      if (dev) chain.dev = dev;
    } else chain.rules.push(line);
  }
  return chains;
}
