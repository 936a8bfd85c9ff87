/** Running processes from tests: `ip`, `ping`, the relay. */
import { run } from '../src/process/run.js';

export { type Run, run } from '../src/process/run.js';

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
