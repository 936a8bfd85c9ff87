/**
 * One bench run: the chosen scenarios in order, each on fresh node namespaces, everything undone at
 * the end (normal end, failure, signal or deadline). `runBench` is what `npm run bench` and the smoke
 * test call.
 */
import { execFileSync } from 'node:child_process';
import { cpus, release } from 'node:os';
import { ROOT } from '../test/testbed/node.js';
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
  calibrationCalls: number;
  execTimeoutMs: number;
  /** The whole run stops (and cleans up) when this has passed. */
  deadlineMs: number;
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
  calibrationCalls: 50,
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
  calibrationCalls: 10,
  deadlineMs: 5 * 60_000,
};

/** dpkg-query's format for the version field (a dpkg placeholder, not a template literal). */
const DPKG_VERSION = '$' + '{Version}';

function meta(): Record<string, string | number> {
  const text = (cmd: string, args: string[]): string => {
    try {
      return execFileSync(cmd, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'ignore'] })
        .toString()
        .trim();
    } catch (err) {
      return `unknown (${err instanceof Error ? err.message.split('\n')[0] : String(err)})`;
    }
  };
  const dirty =
    text('git', ['status', '--porcelain', '--', 'src', 'relay']) === ''
      ? ''
      : ' + uncommitted changes in src/ or relay/';
  return {
    date: new Date().toISOString(),
    commit: `${text('git', ['rev-parse', '--short', 'HEAD'])}${dirty}`,
    kernel: release(),
    cpus: `${cpus().length} × ${cpus()[0]?.model ?? 'unknown'}`,
    node: process.version,
    reference: `containernetworking-plugins ${text('dpkg-query', ['-W', '-f', DPKG_VERSION, 'containernetworking-plugins'])}`,
  };
}

export async function runBench(
  options: BenchOptions,
  progress: (msg: string) => void = () => undefined,
): Promise<BenchReport> {
  const teardown = new Teardown(options.deadlineMs, { handleSignals: options.handleSignals });
  const ctx: BenchContext = { teardown, progress, execTimeoutMs: options.execTimeoutMs };
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
      if (want(4)) report.ovs = await scenario((c) => runOvs(c));
      if (want(5)) report.scale = await scenario((c) => runScale(c, { pods: o.scalePods }));
    }
    report.checks = checksOf(report);
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
