/** Running processes from tests: `ip`, `ping`, the relay. */
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

/** Runs a command that must succeed; rejects with its stderr otherwise. */
export async function must(cmd: string, args: string[]): Promise<string> {
  const r = await run(cmd, args);
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.code}: ${r.stderr.trim()}`);
  return r.stdout;
}

/** `ip -n NS -j ...` parsed. */
export async function ipJson<T = unknown>(ns: string, args: string[]): Promise<T> {
  const out = await must('ip', ['-n', ns, '-j', ...args]);
  return JSON.parse(out === '' ? '[]' : out) as T;
}
