/** Command-line flags shared by the `podwire` commands. */

export interface CliArgs {
  positional: string[];
  json: boolean;
  help: boolean;
  config: string | undefined;
  socket: string | undefined;
  /** Flags with a value not known to this parser, e.g. `--pod X`. */
  values: Map<string, string>;
}

const WITH_VALUE = new Set([
  '--config',
  '--socket',
  '--pod',
  '--datapath',
  '--interface',
  '--seconds',
  '--ranges',
  '--gateway',
  '--prefix-length',
  '--vlan',
]);

export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export function parseArgs(argv: readonly string[]): CliArgs {
  const out: CliArgs = {
    positional: [],
    json: false,
    help: false,
    config: undefined,
    socket: undefined,
    values: new Map(),
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--json') out.json = true;
    else if (a === '--keep') out.values.set('--keep', 'true');
    else if (a === '--help' || a === '-h') out.help = true;
    else if (WITH_VALUE.has(a)) {
      const v = argv[++i];
      if (v === undefined || v.startsWith('--')) throw new UsageError(`${a} needs a value`);
      if (a === '--config') out.config = v;
      else if (a === '--socket') out.socket = v;
      else out.values.set(a, v);
    } else if (a.startsWith('--')) throw new UsageError(`unknown option ${a}`);
    else out.positional.push(a);
  }
  return out;
}
