/**
 * The timed region of every benchmark: exec a CNI plugin with its CNI_* environment and stdin, and
 * wait until it has exited and closed its stdout, as a container runtime does. Both plugins go
 * through this same code, in the same kind of process (a driver inside a node namespace).
 */
import { type ChildProcess, spawn } from 'node:child_process';

/** One plugin execution. */
export interface ExecSpec {
  /** What the report calls it, e.g. "ADD bench-s1-7". */
  tag: string;
  file: string;
  args?: string[];
  env: Record<string, string>;
  stdin: string;
}

export interface ExecResult {
  tag: string;
  /** Milliseconds since the batch started, when spawn was called and when the plugin had exited. */
  startMs: number;
  endMs: number;
  /** Exec to exit: what a runtime waits for. */
  ms: number;
  /** Exit status, or -1 when killed (then `signal` says by what). */
  code: number;
  signal: string | null;
  stdout: string;
  stderr: string;
}

/**
 * A batch: `jobs` run with at most `concurrency` at once; the calls of one job run one after the
 * other (e.g. ADD then DEL of the same pod). A call that runs longer than `timeoutMs` is killed and
 * counts as a failure.
 */
export interface Batch {
  jobs: ExecSpec[][];
  concurrency: number;
  timeoutMs: number;
}

export interface BatchResult {
  /** Same shape as `jobs`. */
  results: ExecResult[][];
  /** First spawn to last exit. */
  wallMs: number;
}

/** Output kept per call: enough for an ADD result or an error object, bounded for 1000s of calls. */
const KEEP_BYTES = 8192;

export class BatchRunner {
  /** Children still running, so that an abort can kill them. */
  readonly #live = new Set<ChildProcess>();

  async run(batch: Batch): Promise<BatchResult> {
    const t0 = performance.now();
    const results: ExecResult[][] = batch.jobs.map(() => []);
    let next = 0;
    const worker = async (): Promise<void> => {
      for (;;) {
        const i = next++;
        const job = batch.jobs[i];
        if (job === undefined) return;
        for (const spec of job)
          (results[i] as ExecResult[]).push(await this.#exec(spec, t0, batch.timeoutMs));
      }
    };
    const workers = Array.from(
      { length: Math.max(1, Math.min(batch.concurrency, batch.jobs.length)) },
      worker,
    );
    await Promise.all(workers);
    const all = results.flat();
    const wallMs =
      all.length === 0 ? 0 : Math.max(...all.map((r) => r.endMs)) - Math.min(...all.map((r) => r.startMs));
    return { results, wallMs };
  }

  /** Kills every plugin still running (abort, driver shutdown). */
  killAll(): void {
    for (const child of this.#live) child.kill('SIGKILL');
  }

  #exec(spec: ExecSpec, t0: number, timeoutMs: number): Promise<ExecResult> {
    return new Promise((resolve) => {
      const startMs = performance.now() - t0;
      const child = spawn(spec.file, spec.args ?? [], { env: spec.env, stdio: ['pipe', 'pipe', 'pipe'] });
      this.#live.add(child);
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      let outLen = 0;
      let errLen = 0;
      child.stdout.on('data', (d: Buffer) => {
        if (outLen < KEEP_BYTES) out.push(d);
        outLen += d.length;
      });
      child.stderr.on('data', (d: Buffer) => {
        if (errLen < KEEP_BYTES) err.push(d);
        errLen += d.length;
      });
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      let spawnError = '';
      child.on('error', (e) => {
        spawnError = `spawn failed: ${e.message}`;
      });
      // 'close' comes after both the exit and the end of stdout/stderr: what a runtime waits for.
      child.on('close', (code, signal) => {
        const endMs = performance.now() - t0;
        clearTimeout(timer);
        this.#live.delete(child);
        resolve({
          tag: spec.tag,
          startMs,
          endMs,
          ms: endMs - startMs,
          code: code ?? -1,
          signal,
          stdout: Buffer.concat(out).toString('utf8').slice(0, KEEP_BYTES),
          stderr: (spawnError + Buffer.concat(err).toString('utf8')).slice(0, KEEP_BYTES),
        });
      });
      // A plugin that exits without reading stdin must not turn into an unhandled EPIPE.
      child.stdin.on('error', () => undefined);
      child.stdin.end(spec.stdin);
    });
  }
}
