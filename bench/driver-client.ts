/**
 * The orchestrator's side of a driver (driver.ts): starts it inside a node namespace, sends it
 * batches and waits for their timings. The driver is started once per node, so the cost of
 * `ip netns exec` is paid once, outside every timed region.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Batch, BatchResult } from './exec-batch.js';

const DRIVER = join(import.meta.dirname, 'driver.js');

interface Pending {
  resolve: (r: BatchResult) => void;
  reject: (e: Error) => void;
}

export class DriverClient {
  readonly #child: ChildProcess;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #stderr = '';
  /** Set once the driver has exited; every later `run` fails with it. */
  #exited: Error | undefined;

  private constructor(child: ChildProcess) {
    this.#child = child;
    child.stderr?.on('data', (d: Buffer) => {
      this.#stderr = (this.#stderr + d.toString()).slice(-4096);
    });
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) =>
      this.#answer(line),
    );
    child.on('exit', (code, signal) => {
      this.#exited = new Error(`bench driver exited (${code ?? signal}): ${this.#stderr.trim()}`);
      for (const p of this.#pending.values()) p.reject(this.#exited);
      this.#pending.clear();
    });
  }

  /** Equivalent to: `ip netns exec NODE_NS node driver.js`. */
  static start(nodeNs: string): DriverClient {
    const child = spawn('ip', ['netns', 'exec', nodeNs, process.execPath, DRIVER], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    return new DriverClient(child);
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** Runs one batch in the driver; rejects when `signal` aborts (the driver is then stopped). */
  run(batch: Batch, signal?: AbortSignal): Promise<BatchResult> {
    if (this.#exited) return Promise.reject(this.#exited);
    const id = this.#nextId++;
    return new Promise<BatchResult>((resolve, reject) => {
      const onAbort = (): void => {
        this.#pending.delete(id);
        reject(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
        void this.stop();
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#pending.set(id, {
        resolve: (r) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(r);
        },
        reject: (e) => {
          signal?.removeEventListener('abort', onAbort);
          reject(e);
        },
      });
      this.#child.stdin?.write(`${JSON.stringify({ id, batch })}\n`);
    });
  }

  /** Ends the driver: closes its stdin (it kills its plugins and exits), SIGKILL after 5 s. */
  async stop(): Promise<void> {
    const child = this.#child;
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((res) => child.once('exit', () => res()));
    child.stdin?.end();
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }

  #answer(line: string): void {
    const msg = JSON.parse(line) as { id: number; result?: BatchResult; error?: string };
    const p = this.#pending.get(msg.id);
    if (!p) return; // an answer to a batch that was aborted
    this.#pending.delete(msg.id);
    if (msg.result) p.resolve(msg.result);
    else p.reject(new Error(`bench driver: ${msg.error ?? 'empty answer'}`));
  }
}
