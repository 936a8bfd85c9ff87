/** Running a helper program to completion: the bed's `ip` and `ping`, the agent's `nft`. */
import { spawn } from 'node:child_process';

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs a command to completion; never rejects on a non-zero exit (the caller asserts on `code`).
 * `timeoutMs`: the child is killed (SIGKILL) once it has run that long, and `code` is -1.
 */
export function run(
  cmd: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; input?: string; timeoutMs?: number } = {},
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const input = opts.input;
    const child = spawn(cmd, args, {
      env: opts.env ?? process.env,
      stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const timer =
      opts.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            stderr += `killed after ${opts.timeoutMs} ms`;
            child.kill('SIGKILL');
          }, opts.timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, stdout, stderr });
    });
    if (child.stdin) {
      // A child that exits without reading its stdin (e.g. on a usage error) must not crash the test.
      child.stdin.on('error', () => undefined);
      child.stdin.end(input);
    }
  });
}
