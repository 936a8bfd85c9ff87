/** `bin/podwire`: the agent and the CLI. */
import { PodwireError } from '../base/errors.js';
import { agentCommand } from './agent-command.js';
import { parseArgs, UsageError } from './args.js';
import { arpCommand } from './arp-command.js';
import { COMMANDS, type Command } from './commands.js';
import { demoCommand } from './demo-command.js';
import { flowsCommand } from './flows-command.js';
import { nodeCommand } from './node-command.js';
import { poolCommand } from './pool-command.js';

const ALL: Record<string, Command> = {
  agent: agentCommand,
  arp: arpCommand,
  demo: demoCommand,
  flows: flowsCommand,
  node: nodeCommand,
  pool: poolCommand,
  ...COMMANDS,
};

function usage(): string {
  const width = Math.max(...Object.keys(ALL).map((k) => k.length));
  const lines = Object.entries(ALL).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return `usage: podwire <command> [options]\n\ncommands:\n${lines.join('\n')}\n\n\`podwire <command> --help\` for a command's options.\n`;
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    process.stdout.write(usage());
    return name === undefined ? 2 : 0;
  }
  const command = ALL[name];
  if (!command) {
    process.stderr.write(`podwire: unknown command ${JSON.stringify(name)}\n\n${usage()}`);
    return 2;
  }
  let args: ReturnType<typeof parseArgs>;
  try {
    args = parseArgs(rest);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`podwire ${name}: ${err.message}\n\n${command.help}`);
    return 2;
  }
  if (args.help) {
    process.stdout.write(command.help);
    return 0;
  }
  try {
    return await command.run(args, (s) => process.stdout.write(s));
  } catch (err) {
    if (!(err instanceof PodwireError)) throw err;
    process.stderr.write(`podwire ${name}: ${err.message}\n`);
    return 1;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`podwire: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
