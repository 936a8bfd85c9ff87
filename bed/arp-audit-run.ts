/**
 * `podwire arp audit` as a person runs it, in a namespace the test made: `ready` resolves once the
 * capture socket is open (the CLI says so on stderr), so the traffic a test makes afterwards is inside
 * the capture however slowly the CLI started; `done` with its exit status and output.
 */
import { spawn } from 'node:child_process';
import type { Run } from './exec.js';
import { ROOT } from './node.js';

const CLI = `${ROOT}/bin/podwire`;

export function startArpAudit(ns: string, args: string[]): { ready: Promise<void>; done: Promise<Run> } {
  const child = spawn('ip', ['netns', 'exec', ns, CLI, 'arp', 'audit', ...args]);
  let stdout = '';
  let stderr = '';
  let signalReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    signalReady = resolve;
  });
  child.stdout.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
    if (stderr.includes('capturing on')) signalReady();
  });
  const done = new Promise<Run>((resolve) =>
    child.on('close', (code) => {
      signalReady();
      resolve({ code: code ?? -1, stdout, stderr });
    }),
  );
  return { ready, done };
}
