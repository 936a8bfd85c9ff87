/** `bin/podwire`: the agent and the CLI. */
import { Agent } from '../agent/agent.js';
import { loadAgentConfig } from '../agent/config.js';
import { jsonLogger } from '../agent/log.js';
import { PodwireError } from '../cni/errors.js';

const USAGE = `usage: podwire <command>

commands:
  agent --config FILE   run the node agent in the foreground (JSON logs on stderr; SIGTERM stops it)
  help                  show this text
`;

async function runAgent(args: string[]): Promise<number> {
  const i = args.indexOf('--config');
  const path = i >= 0 ? args[i + 1] : undefined;
  if (!path) {
    process.stderr.write(`podwire agent: --config FILE is required\n${USAGE}`);
    return 2;
  }
  const log = jsonLogger();
  let agent: Agent;
  try {
    agent = await Agent.start(loadAgentConfig(path), log);
  } catch (err) {
    const code = err instanceof PodwireError ? err.code : 'ERR_INTERNAL';
    log.error('agent failed to start', { code, err: err instanceof Error ? err.message : String(err) });
    return 1;
  }
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      log.info('stopping', { signal });
      agent.stop().then(resolve, (err: unknown) => {
        log.error('stop failed', { err: String(err) });
        resolve();
      });
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  return 0;
}

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case 'agent':
      return runAgent(rest);
    case 'help':
    case '--help':
    case '-h':
    case undefined:
      process.stdout.write(USAGE);
      return cmd === undefined ? 2 : 0;
    default:
      process.stderr.write(`podwire: unknown command ${JSON.stringify(cmd)}\n${USAGE}`);
      return 2;
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
