/** tcpdump in a test namespace: what a capture on one interface saw, as tcpdump's text lines. */
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';

export interface Capture {
  /** Waits a moment for frames in flight, stops tcpdump and returns its lines. */
  stop(): Promise<string[]>;
}

/** Starts `tcpdump -e -n` on `ifname` in `ns` with a filter; resolves once it listens. */
export async function capture(ns: string, ifname: string, filter: string): Promise<Capture> {
  const child = spawn(
    'ip',
    ['netns', 'exec', ns, 'tcpdump', '--immediate-mode', '-l', '-n', '-e', '-i', ifname, filter],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const deadline = Date.now() + 10_000;
  while (!err.includes('listening on')) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`tcpdump did not start: ${err}`);
    }
    await sleep(20);
  }
  return {
    stop: async () => {
      await sleep(300);
      const exited = new Promise((res) => child.once('exit', res));
      child.kill('SIGINT');
      await exited;
      return out.split('\n').filter((l) => l.trim() !== '');
    },
  };
}
