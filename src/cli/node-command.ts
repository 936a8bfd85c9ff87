/** `podwire node remove NAME`: takes a node out of the cluster for good (its record and pod CIDRs). */
import { loadAgentConfig } from '../agent/config.js';
import { InvalidConfigError } from '../base/errors.js';
import { openClusterStore } from '../cluster/config.js';
import { removeNode } from '../cluster/register.js';
import type { CliArgs } from './args.js';
import type { Command } from './commands.js';
import { DEFAULT_CONFIG_PATH } from './control-client.js';

async function run(args: CliArgs, out: (s: string) => void): Promise<number> {
  const [verb, name] = args.positional;
  if (verb !== 'remove' || !name) {
    out(nodeCommand.help);
    return 2;
  }
  const config = loadAgentConfig(args.config ?? DEFAULT_CONFIG_PATH);
  if (!config.cluster) throw new InvalidConfigError('the configuration has no cluster: section');
  const store = await openClusterStore(config.cluster.store);
  try {
    const freed = await removeNode(store, name, { signal: AbortSignal.timeout(15_000) });
    out(
      args.json
        ? `${JSON.stringify({ node: name, released: freed })}\n`
        : `removed node ${name}; released ${freed.join(', ') || 'no CIDR'}\n`,
    );
    return 0;
  } finally {
    await store.close();
  }
}

export const nodeCommand: Command = {
  summary: 'remove a node from the cluster (its record and pod CIDRs)',
  help: `usage: podwire node remove NAME [--config FILE] [--json]

Deletes the node's record from the cluster store and releases its pod CIDRs; every other node's
agent then removes its routes and tunnels to it. Run it after the node is gone: a node's agent that
still runs registers itself again.

options:
  --config FILE   the agent configuration that names the cluster store; default ${DEFAULT_CONFIG_PATH}
  --json          machine-readable output
`,
  run,
};
