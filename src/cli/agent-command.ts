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
  // The handlers go in before the start: a SIGTERM that arrives while the agent starts (or in the
  // moment after its "agent started" line) must not take the default action, which kills the process
  // with the uplink still moved into the bridge and the datapath half up. It stops the agent as soon
  // as the start is over (the start is bounded: each of its waits has a deadline). A second signal of
  // the same kind takes the default action.
  let signalled: ((signal: string) => void) | undefined;
  let pending: string | undefined;
  const onSignal = (signal: string) => {
    if (signalled) signalled(signal);
    else if (pending === undefined) {
      pending = signal;
      log.info('signal while starting: stopping once started', { signal });
    }
  };
  process.once('SIGTERM', () => onSignal('SIGTERM'));
  process.once('SIGINT', () => onSignal('SIGINT'));
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
    signalled = (signal: string) => {
      log.info('stopping', { signal });
      agent.stop().then(resolve, (err: unknown) => {
        log.error('stop failed', { err: String(err) });
        resolve();
      });
    };
    if (pending) signalled(pending);
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
