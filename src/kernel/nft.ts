/**
 * nftables through the `nft` binary, for the few rules podwire installs once per agent start (never
 * per pod): a script is applied as one transaction, all of it or none. The runner is a seam: the
 * agent's runs in its own namespace; a test's runs in the throwaway node namespace it made.
 */
import { spawn } from 'node:child_process';
import { PodwireError } from '../cni/errors.js';

/** Applies an `nft -f` script atomically. */
export type NftRunner = (script: string) => Promise<void>;

/**
 * Equivalent to: `nft -f - < script`, in the calling process's network namespace, or with `netns` (a
 * name under /run/netns) `ip netns exec NETNS nft -f -`.
 */
export function nftRunner(netns?: string): NftRunner {
  const [cmd, args] = netns ? ['ip', ['netns', 'exec', netns, 'nft', '-f', '-']] : ['nft', ['-f', '-']];
  return (script) =>
    new Promise((resolve, reject) => {
      const child = spawn(cmd, args as string[], { stdio: ['pipe', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => {
        stderr += d.toString();
      });
      child.on('error', (err) =>
        reject(new PodwireError('ERR_DATAPATH', `nft: ${err.message} (is nftables installed?)`)),
      );
      child.on('close', (code) =>
        code === 0
          ? resolve()
          : reject(new PodwireError('ERR_DATAPATH', `nft exited ${code}: ${stderr.trim()}`)),
      );
      child.stdin.on('error', () => undefined);
      child.stdin.end(script);
    });
}

/** Lines that create `family name` if missing and then delete it: an idempotent "drop the table". */
export function dropTable(family: string, name: string): string[] {
  return [`table ${family} ${name}`, `delete table ${family} ${name}`];
}
