/**
 * nftables through the `nft` binary, for the few chains podwire installs at agent start and when
 * bridging moves the uplink, the egress masquerade's set of kept destinations when peers join or
 * leave, and on OVS's kernel datapath the checksum hop's chain of each pod port (per ADD and DEL:
 * the one per-pod use; the Linux bridge's guard counters and the masquerade's are also read per
 * metrics scrape): a script is applied as one transaction, all of it or none. `Nft` is a seam: the agent's
 * runs in its own namespace; a test's runs in the throwaway node namespace it made.
 */
import { DatapathError } from '../base/errors.js';
import { type Run, run } from '../process/run.js';

/** A wedged `nft` must not hang the agent's start, stop or a metrics scrape. */
const NFT_TIMEOUT_MS = 10_000;

/** nftables in one network namespace. */
export interface Nft {
  /** Equivalent to: `nft -f - < script`: applied as one transaction. */
  apply(script: string): Promise<void>;
  /** Equivalent to: `nft ARGS...` (e.g. `list table netdev T`); its standard output. */
  run(args: string[]): Promise<string>;
}

/**
 * `nft` in the calling process's network namespace, or with `netns` (a name under /run/netns)
 * through `ip netns exec NETNS nft`.
 */
export function nftIn(netns?: string): Nft {
  const argv = (args: string[]): [string, string[]] =>
    netns ? ['ip', ['netns', 'exec', netns, 'nft', ...args]] : ['nft', args];
  return {
    apply: async (script) => {
      await exec(...argv(['-f', '-']), script);
    },
    run: (args) => exec(...argv(args)),
  };
}

async function exec(cmd: string, args: string[], input?: string): Promise<string> {
  let r: Run;
  try {
    r = await run(cmd, args, { timeoutMs: NFT_TIMEOUT_MS, ...(input === undefined ? {} : { input }) });
  } catch (err) {
    throw new DatapathError(`nft: ${String(err)} (is nftables installed?)`);
  }
  if (r.code !== 0) throw new DatapathError(`nft exited ${r.code}: ${r.stderr.trim()}`);
  return r.stdout;
}

/** Lines that create `family name` if missing and then delete it: an idempotent "drop the table". */
export function dropTable(family: string, name: string): string[] {
  return [`table ${family} ${name}`, `delete table ${family} ${name}`];
}

/**
 * Equivalent to: `nft -j list counters`: the packets of every named counter, by "FAMILY TABLE NAME";
 * empty when `nft` is not there or fails.
 */
export async function namedCounterPackets(nft: Nft): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  let listing: {
    nftables?: Array<{ counter?: { family: string; table: string; name: string; packets: number } }>;
  };
  try {
    listing = JSON.parse(await nft.run(['-j', 'list', 'counters']));
  } catch {
    return out;
  }
  for (const { counter: c } of listing.nftables ?? [])
    if (c) out.set(`${c.family} ${c.table} ${c.name}`, c.packets);
  return out;
}
