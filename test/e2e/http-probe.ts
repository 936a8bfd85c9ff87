/**
 * HTTP through a hostPort: busybox `httpd` serving one token in a namespace, and `curl` from another
 * namespace the test made. Every request runs inside a test namespace (I7).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { run } from '../../bed/exec.js';

/** `curl http://HOST:PORT/` from namespace `ns`: the body, or undefined when no answer came. */
export async function httpGet(
  ns: string,
  host: string,
  port: number,
  timeoutS = 3,
): Promise<string | undefined> {
  const url = host.includes(':') ? `http://[${host}]:${port}/` : `http://${host}:${port}/`;
  const r = await run('ip', ['netns', 'exec', ns, 'curl', '-sS', '--max-time', String(timeoutS), url]);
  return r.code === 0 ? r.stdout : undefined;
}

/**
 * `curl http://HOST:PORT/PATH` from namespace `ns`, the body thrown away: the bytes received and the
 * average rate in bytes/s, or undefined when the transfer failed.
 */
export async function httpRate(
  ns: string,
  host: string,
  port: number,
  path: string,
  timeoutS = 20,
): Promise<{ bytes: number; bytesPerSecond: number } | undefined> {
  const url = host.includes(':') ? `http://[${host}]:${port}/${path}` : `http://${host}:${port}/${path}`;
  const r = await run('ip', [
    ...['netns', 'exec', ns, 'curl', '-sS', '--max-time', String(timeoutS), '-o', '/dev/null'],
    ...['-w', '%{size_download} %{speed_download}', url],
  ]);
  if (r.code !== 0) return undefined;
  const [bytes, rate] = r.stdout.trim().split(' ').map(Number);
  return { bytes: bytes ?? 0, bytesPerSecond: rate ?? 0 };
}

/** True when something listens on TCP `port` in namespace `ns` (`ss -Hltn`). */
export async function listening(ns: string, port: number): Promise<boolean> {
  const r = await run('ip', ['netns', 'exec', ns, 'ss', '-Hltn', `sport = :${port}`]);
  return r.code === 0 && r.stdout.trim() !== '';
}

/**
 * busybox httpd in a namespace, serving `token` as its index page (and any `files`); `stop()` kills it
 * and removes its files.
 */
export class Httpd {
  readonly #child: ChildProcess;
  readonly #dir: string;

  private constructor(child: ChildProcess, dir: string) {
    this.#child = child;
    this.#dir = dir;
  }

  /** `files`: more files to serve, by name. */
  static async start(
    busybox: string,
    ns: string,
    port: number,
    token: string,
    files: Record<string, Buffer> = {},
  ): Promise<Httpd> {
    const dir = mkdtempSync(join(tmpdir(), 'pwt-httpd-'));
    writeFileSync(join(dir, 'index.html'), token);
    for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
    const child = spawn('ip', ['netns', 'exec', ns, busybox, 'httpd', '-f', '-p', String(port), '-h', dir], {
      stdio: 'ignore',
    });
    const httpd = new Httpd(child, dir);
    const deadline = Date.now() + 5_000;
    while (!(await listening(ns, port))) {
      if (child.exitCode !== null || Date.now() > deadline) {
        await httpd.stop();
        throw new Error(`httpd in ${ns} did not listen on ${port}`);
      }
      await sleep(20);
    }
    return httpd;
  }

  async stop(): Promise<void> {
    const c = this.#child;
    if (c.exitCode === null && c.signalCode === null) {
      const exited = new Promise<void>((resolve) => c.once('exit', () => resolve()));
      c.kill('SIGKILL');
      await exited;
    }
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
