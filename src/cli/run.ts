/**
 * Runs one `podwire` command from argv: usage, option parsing, --help, and the exit code. Shared by
 * `bin/podwire` (src/cli/main.ts) and the demo entry of the test bed (bed/demo-main.ts).
 */
import { PodwireError } from '../base/errors.js';
import { parseArgs, UsageError } from './args.js';
import type { Command } from './commands.js';

function usage(commands: Record<string, Command>, footer: string): string {
  const width = Math.max(...Object.keys(commands).map((k) => k.length));
  const lines = Object.entries(commands).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return `usage: podwire <command> [options]\n\ncommands:\n${lines.join('\n')}\n\n\`podwire <command> --help\` for a command's options.\n${footer}`;
}

async function runCommand(
  commands: Record<string, Command>,
  argv: string[],
  footer: string,
): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    process.stdout.write(usage(commands, footer));
    return name === undefined ? 2 : 0;
  }
  const command = commands[name];
  if (!command) {
    process.stderr.write(`podwire: unknown command ${JSON.stringify(name)}\n\n${usage(commands, footer)}`);
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
    if (err instanceof PodwireError) process.stderr.write(`podwire ${name}: ${err.message}\n`);
    else if (command.errorStatus === undefined) throw err;
    else
      process.stderr.write(
        `podwire ${name}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
      );
    return command.errorStatus ?? 1;
  }
}

/** Runs the command named by argv[0] and sets the process's exit code. */
export function runCli(commands: Record<string, Command>, argv: string[], footer = ''): void {
  runCommand(commands, argv, footer).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`podwire: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
