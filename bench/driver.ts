/**
 * The bench driver: a process started inside a node namespace (`ip netns exec NODE node driver.js`)
 * that execs the plugins there, so that each plugin inherits the node namespace exactly as it would
 * from a runtime on that node, with no per-call wrapper.
 *
 * Protocol: one JSON request per line on stdin, `{id, batch}`; one JSON answer per line on stdout,
 * `{id, result}` or `{id, error}`. End of stdin, SIGINT or SIGTERM: kill the running plugins and exit.
 */
import { createInterface } from 'node:readline';
import { type Batch, BatchRunner } from './exec-batch.js';

export interface DriverRequest {
  id: number;
  batch: Batch;
}

const runner = new BatchRunner();

function shutdown(code: number): void {
  runner.killAll();
  process.exit(code);
}

process.on('SIGINT', () => shutdown(130));
process.on('SIGTERM', () => shutdown(143));

const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  const req = JSON.parse(line) as DriverRequest;
  runner.run(req.batch).then(
    (result) => process.stdout.write(`${JSON.stringify({ id: req.id, result })}\n`),
    (err: unknown) =>
      process.stdout.write(
        `${JSON.stringify({ id: req.id, error: err instanceof Error ? (err.stack ?? err.message) : String(err) })}\n`,
      ),
  );
});
lines.on('close', () => shutdown(0));
