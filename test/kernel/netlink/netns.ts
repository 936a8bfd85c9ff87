/**
 * Throwaway network namespaces for the integration tests (I7): each is named pwt-nl-<random>, is
 * removed by `delete()` whatever happened, and the machine's own namespace is never changed. Importing
 * this module has no side effects (node's runner executes every file under test/).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, statSync } from 'node:fs';
import { CLONE_NEWNET, setns } from '../../../src/kernel/libc.js';

const THREAD_NETNS = '/proc/thread-self/ns/net';

export class TestNetns {
  readonly name: string;
  readonly path: string;
  #deleted = false;

  private constructor(name: string) {
    this.name = name;
    this.path = `/run/netns/${name}`;
  }

  static create(): TestNetns {
    const ns = new TestNetns(`pwt-nl-${randomBytes(4).toString('hex')}`);
    execFileSync('ip', ['netns', 'add', ns.name]);
    return ns;
  }

  /** Runs `ip -n NAME ARGS...` and returns its standard output. */
  ip(...args: string[]): string {
    return execFileSync('ip', ['-n', this.name, ...args], { encoding: 'utf8' });
  }

  /** Runs `ip -n NAME -j ARGS...` and parses the JSON it prints. */
  ipJson<T = unknown>(...args: string[]): T {
    const out = execFileSync('ip', ['-n', this.name, '-j', ...args], { encoding: 'utf8' });
    return JSON.parse(out === '' ? '[]' : out) as T;
  }

  /** An open descriptor of this namespace; the caller closes it. */
  openFd(): number {
    return openSync(this.path, 'r');
  }

  /**
   * Runs `fn` with the calling thread switched into this namespace, synchronously (I1): `fn` must not
   * return a promise. If the thread cannot be switched back the process exits rather than go on in
   * the wrong namespace.
   */
  enter<T>(fn: () => T): T {
    const home = openSync(THREAD_NETNS, 'r');
    const homeIno = statSync(THREAD_NETNS).ino;
    const target = openSync(this.path, 'r');
    try {
      setns(target, CLONE_NEWNET);
      if (statSync(THREAD_NETNS).ino !== statSync(this.path).ino)
        throw new Error(`setns into ${this.name} did not take`);
      const result = fn();
      if (result instanceof Promise) throw new Error('TestNetns.enter: fn must be synchronous');
      return result;
    } finally {
      try {
        setns(home, CLONE_NEWNET);
      } catch (err) {
        console.error('cannot return to the original network namespace', err);
        process.exit(70);
      }
      if (statSync(THREAD_NETNS).ino !== homeIno) {
        console.error('the thread is not back in its original network namespace');
        process.exit(70);
      }
      closeSync(home);
      closeSync(target);
    }
  }

  /** Removes the namespace (and with it every link inside); idempotent. */
  delete(): void {
    if (this.#deleted) return;
    this.#deleted = true;
    execFileSync('ip', ['netns', 'del', this.name]);
  }
}
