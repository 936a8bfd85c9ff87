/** Running a helper program to completion: the bed's `ip` and `ping`, the agent's `nft`. */
import { spawn } from 'node:child_process';

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command to completion; never rejects on a non-zero exit (the caller asserts on `code`). */
export function run(
  cmd: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; input?: string } = {},
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
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
    if (child.stdin) {
      // A child that exits without reading its stdin (e.g. on a usage error) must not crash the test.
      child.stdin.on('error', () => undefined);
      child.stdin.end(input);
    }
  });
}
