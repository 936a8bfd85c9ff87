/**
 * One bench run: the chosen scenarios in order, each on fresh node namespaces, everything undone at
 * the end (normal end, failure, signal or deadline). `runBench` is what `npm run bench` and the smoke
 * test call.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { cpus, loadavg, release } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../bed/node.js';
import { runProfile } from './profile.js';
import { type BenchReport, checksOf } from './report.js';
import type { BenchContext } from './scenario.js';
import { runBurst } from './scenarios/burst.js';
import { runCalibration } from './scenarios/calibrate.js';
import { runOvs } from './scenarios/ovs.js';
import { runScale } from './scenarios/scale.js';
import { runSequential } from './scenarios/sequential.js';
import { runSoak } from './scenarios/soak.js';
import { Teardown } from './teardown.js';

export interface BenchOptions {
  /** Scenario numbers to run, from 1-5; 0 is the calibration (floors). */
  scenarios: number[];
  pods: number;
  chunk: number;
  burstSizes: number[];
  burstReps: number;
  soakCycles: number;
  soakInFlight: number;
  soakSampleEvery: number;
  scalePods: number;
  /** Scenario 4 (OVS): pods one at a time and their chunk; its bursts are `burstSizes` × `burstReps`. */
  ovsPods: number;
  ovsChunk: number;
  calibrationCalls: number;
  execTimeoutMs: number;
  /** The whole run stops (and cleans up) when this has passed. */
  deadlineMs: number;
  /** Node flags for podwire's agent. */
  agentFlags: string[];
  /** When set: only the profile run (scenario 2 on podwire under --cpu-prof), its output here. */
  profileDir?: string;
  /** Install SIGINT/SIGTERM/SIGHUP handlers that clean up (the CLI does; a test runner has its own). */
  handleSignals: boolean;
}

export const FULL: BenchOptions = {
  scenarios: [0, 1, 2, 3, 4, 5],
  pods: 200,
  chunk: 50,
  burstSizes: [20, 50, 100],
  burstReps: 3,
  soakCycles: 1000,
  soakInFlight: 20,
  soakSampleEvery: 100,
  scalePods: 250,
  ovsPods: 60,
  ovsChunk: 20,
  calibrationCalls: 50,
  agentFlags: [],
  execTimeoutMs: 60_000,
  deadlineMs: 30 * 60_000,
  handleSignals: true,
};

export const QUICK: BenchOptions = {
  ...FULL,
  pods: 20,
  chunk: 10,
  burstSizes: [20, 50],
  burstReps: 1,
  soakCycles: 200,
  soakSampleEvery: 50,
  scalePods: 30,
  ovsPods: 10,
  ovsChunk: 5,
  calibrationCalls: 10,
  deadlineMs: 5 * 60_000,
};

/** dpkg-query's format for the version field (a dpkg placeholder, not a template literal). */
const DPKG_VERSION = '$' + '{Version}';

/**
 * The commit measured: git's HEAD (and whether src/ or relay/ differ from it), or, for a snapshot
 * made with `git archive` (no .git), the `.bench-commit` file written next to it.
 */
function commitOf(text: (cmd: string, args: string[]) => string | undefined): string {
  const head = text('git', ['rev-parse', '--short', 'HEAD']);
  if (head === undefined) {
    const file = join(ROOT, '.bench-commit');
    return existsSync(file) ? `${readFileSync(file, 'utf8').trim()} (snapshot)` : 'unknown';
  }
  const status = text('git', ['status', '--porcelain', '--', 'src', 'relay']);
  return status === '' ? head : `${head} + uncommitted changes in src/ or relay/`;
}

function meta(): Record<string, string | number> {
  const text = (cmd: string, args: string[]): string | undefined => {
    try {
      return execFileSync(cmd, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'ignore'] })
        .toString()
        .trim();
    } catch {
      return undefined; // reported as unknown by the caller
    }
  };
  return {
    date: new Date().toISOString(),
    commit: commitOf(text),
    kernel: release(),
    cpus: `${cpus().length} × ${cpus()[0]?.model ?? 'unknown'}`,
    node: process.version,
    'load average at start (1, 5, 15 min)': loadavg()
      .map((x) => x.toFixed(2))
      .join(' '),
    reference: `containernetworking-plugins ${text('dpkg-query', ['-W', '-f', DPKG_VERSION, 'containernetworking-plugins']) ?? 'unknown'}`,
  };
}

export async function runBench(
  options: BenchOptions,
  progress: (msg: string) => void = () => undefined,
): Promise<BenchReport> {
  const teardown = new Teardown(options.deadlineMs, { handleSignals: options.handleSignals });
  const ctx: BenchContext = {
    teardown,
    progress,
    execTimeoutMs: options.execTimeoutMs,
    podwire: { nodeFlags: options.agentFlags },
  };
  const report: BenchReport = { meta: meta(), checks: [] };
  const want = (n: number): boolean => options.scenarios.includes(n);
  try {
    if (options.profileDir !== undefined) {
      const { burst, ...profile } = await runProfile(ctx, options.profileDir, {
        sizes: options.burstSizes,
        reps: options.burstReps,
      });
      report.burst = burst;
      report.profile = profile;
    } else {
      // Each scenario starts its own node namespaces and undoes them before the next one starts.
      const scenario = <T>(run: (c: BenchContext) => Promise<T>): Promise<T> =>
        teardown.scope((part) => run({ ...ctx, teardown: part }));
      const o = options;
      if (want(0))
        report.calibration = await scenario((c) =>
          runCalibration(c, { calls: o.calibrationCalls, burst: 100 }),
        );
      if (want(1))
        report.sequential = await scenario((c) => runSequential(c, { pods: o.pods, chunk: o.chunk }));
      if (want(2))
        report.burst = await scenario((c) => runBurst(c, { sizes: o.burstSizes, reps: o.burstReps }));
      if (want(3)) {
        const soak = { cycles: o.soakCycles, inFlight: o.soakInFlight, sampleEvery: o.soakSampleEvery };
        report.soak = await scenario((c) => runSoak(c, soak));
      }
      if (want(4)) {
        const ovs = { pods: o.ovsPods, chunk: o.ovsChunk, sizes: o.burstSizes, reps: o.burstReps };
        report.ovs = await scenario((c) => runOvs(c, ovs));
      }
      if (want(5)) report.scale = await scenario((c) => runScale(c, { pods: o.scalePods }));
    }
    report.checks = checksOf(report);
    // Other work on the machine during the run shows here (the bench itself keeps about one CPU busy).
    report.meta['load average at end'] = loadavg()
      .map((x) => x.toFixed(2))
      .join(' ');
    return report;
  } catch (err) {
    // A signal or the deadline makes whatever was running fail in its own way; say why it stopped.
    const reason: unknown = teardown.signal.reason;
    if (teardown.signal.aborted && reason instanceof Error && reason !== err)
      throw new Error(reason.message, { cause: err });
    throw err;
  } finally {
    await teardown.run();
  }
}
