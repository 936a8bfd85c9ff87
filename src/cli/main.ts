/** `bin/podwire`: the agent and the CLI. */
import { agentCommand } from './agent-command.js';
import { arpCommand } from './arp-command.js';
import { COMMANDS, type Command } from './commands.js';
import { flowsCommand } from './flows-command.js';
import { nodeCommand } from './node-command.js';
import { policyCommand } from './policy-command.js';
import { poolCommand } from './pool-command.js';
import { runCli } from './run.js';

const ALL: Record<string, Command> = {
  agent: agentCommand,
  arp: arpCommand,
  flows: flowsCommand,
  node: nodeCommand,
  policy: policyCommand,
  pool: poolCommand,
  ...COMMANDS,
};

runCli(
  ALL,
  process.argv.slice(2),
  "\n`podwire demo` (a two-node cluster of namespaces on this machine) runs from a source checkout:\nit is the test bed's (bed/demo.ts), which the node image does not carry.\n",
);
