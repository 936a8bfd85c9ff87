/**
 * nftables through the `nft` binary, for the few rules podwire installs once per agent start (never
 * per pod): a script is applied as one transaction, all of it or none. `Nft` is a seam: the agent's
 * runs in its own namespace; a test's runs in the throwaway node namespace it made.
 */
import { spawn } from 'node:child_process';
import { PodwireError } from '../cni/errors.js';

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

function exec(cmd: string, args: string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('error', (err) =>
      reject(new PodwireError('ERR_DATAPATH', `nft: ${err.message} (is nftables installed?)`)),
    );
    child.on('close', (code) =>
      code === 0
        ? resolve(stdout)
        : reject(new PodwireError('ERR_DATAPATH', `nft exited ${code}: ${stderr.trim()}`)),
    );
    child.stdin.on('error', () => undefined);
    child.stdin.end(input ?? '');
  });
}

/** Lines that create `family name` if missing and then delete it: an idempotent "drop the table". */
export function dropTable(family: string, name: string): string[] {
  return [`table ${family} ${name}`, `delete table ${family} ${name}`];
}
