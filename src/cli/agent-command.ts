/** `podwire agent --config FILE`: runs the node agent in the foreground until SIGTERM or SIGINT. */
import { Agent } from '../agent/agent.js';
import { loadAgentConfig } from '../agent/config.js';
import { jsonLogger } from '../agent/log.js';
import { v8Gc } from '../agent/ops/idle-release.js';
import { idleGcWarning, threadpoolWarning } from '../agent/runtime.js';
import { PodwireError } from '../base/errors.js';
import type { CliArgs } from './args.js';
import type { Command } from './commands.js';

async function runAgent(args: CliArgs, out: (s: string) => void): Promise<number> {
  if (!args.config) {
    out(`podwire agent: --config FILE is required\n\n${agentCommand.help}`);
    return 2;
  }
  const log = jsonLogger();
  for (const warning of [threadpoolWarning(), idleGcWarning(v8Gc() !== undefined)])
    if (warning) log.warn(warning);
  let agent: Agent;
  try {
    agent = await Agent.start(loadAgentConfig(args.config), log);
  } catch (err) {
    const code = err instanceof PodwireError ? err.code : 'ERR_INTERNAL';
    log.error('agent failed to start', { code, err: err instanceof Error ? err.message : String(err) });
    // At once: a half-open step (a connection's retry timer, a watch) must not keep a process alive
    // that serves nothing. The log line is out: stderr is synchronous for files and pipes.
    process.exit(1);
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

export const agentCommand: Command = {
  summary: 'run the node agent in the foreground',
  help: `usage: podwire agent --config FILE

Runs the node agent in the foreground: JSON log lines on stderr; SIGTERM or SIGINT stops it cleanly
(calls in progress finish; pods keep their network).
`,
  run: runAgent,
};
