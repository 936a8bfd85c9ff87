/**
 * A long-running component of the Kubernetes bed (etcd aside): a process whose output goes to a log
 * file, killed with the bed (`setpriv --pdeathsig KILL`), stopped with SIGTERM then SIGKILL.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';

export class Daemon {
  readonly name: string;
  readonly log: string;
  readonly #argv: string[];
  #child: ChildProcess | undefined;

  /** `argv`: the whole command, e.g. `['nsenter', '-t', PID, '-n', '-m', '--', BIN, ...]`. */
  constructor(name: string, argv: string[], log: string) {
    this.name = name;
    this.#argv = argv;
    this.log = log;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  get running(): boolean {
    const c = this.#child;
    return c !== undefined && c.exitCode === null && c.signalCode === null;
  }

  start(): void {
    if (this.running) throw new Error(`${this.name} is already running`);
    const fd = openSync(this.log, 'a');
    try {
      // The bed's processes are niced: two shared cores, other work beside.
      const [cmd, ...args] = ['nice', '-n', '10', 'setpriv', '--pdeathsig', 'KILL', '--', ...this.#argv];
      this.#child = spawn(cmd as string, args, { stdio: ['ignore', fd, fd] });
      this.#child.on('error', () => {});
    } finally {
      closeSync(fd);
    }
  }

  /** SIGTERM, SIGKILL after `graceMs`; resolves once the process is gone. */
  async stop(graceMs = 5000): Promise<void> {
    const child = this.#child;
    if (child === undefined || !this.running) return;
    const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await gone;
    clearTimeout(timer);
  }

  /** The last lines of the log, for error messages. */
  tail(lines = 30): string {
    try {
      return readFileSync(this.log, 'utf8').split('\n').slice(-lines).join('\n');
    } catch {
      return '';
    }
  }
}
