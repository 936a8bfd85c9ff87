/**
 * Floors under the figures, measured in the same drivers the scenarios use:
 * - exec floor: spawning `/bin/true` until it exits (what the driver itself costs per call);
 * - a per-call `ip netns exec NODE` wrapper (what the bench avoids by running the driver inside the
 *   node namespace; shown so that it is known what a wrapper would have added);
 * - VERSION through each plugin: the least a call can cost (podwire: relay + socket + agent
 *   dispatch; reference: starting the Go binary);
 * - a burst floor: `size` × `/bin/true` started at once, first exec to last exit.
 */
import type { ExecResult, ExecSpec } from '../exec-batch.js';
import type { BenchContext } from '../scenario.js';
import { median, type Stats, summarize } from '../stats.js';
import { type Subject, startBoth } from '../subjects.js';

export interface CalibrationOptions {
  calls: number;
  burst: number;
}

export interface CalibrationResult {
  options: CalibrationOptions;
  execFloor: Stats;
  netnsExecWrapper: Stats;
  /** Median over the interleaved pairs of (wrapped - bare). */
  wrapperCostMs: number;
  podwireVersion: Stats;
  referenceVersion: Stats;
  burstFloorWallMs: Stats;
}

const NOBODY = { ns: 'none', containerId: 'none' };

export async function runCalibration(
  ctx: BenchContext,
  options: CalibrationOptions,
): Promise<CalibrationResult> {
  const [podwire, reference] = (await startBoth(ctx.teardown, ctx.podwire)) as [Subject, Subject];
  ctx.progress('calibration: exec floor, netns wrapper, VERSION round trips');
  const plain = (file: string, args: string[] = []): ExecSpec => ({
    tag: `exec ${file}`,
    file,
    args,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    stdin: '',
  });
  const seq = async (s: Subject, spec: ExecSpec): Promise<Stats> => {
    ctx.teardown.check();
    const b = await s.driver.run(
      {
        jobs: Array.from({ length: options.calls }, () => [spec]),
        concurrency: 1,
        timeoutMs: ctx.execTimeoutMs,
      },
      ctx.teardown.signal,
    );
    const failed = b.results.flat().filter((r) => r.code !== 0);
    if (failed.length > 0) throw new Error(`calibration ${spec.tag}: ${failed[0]?.stderr ?? ''}`);
    return summarize(b.results.flat().map((r) => r.ms));
  };
  // Interleaved, so that a change in the machine's load hits both sides of the difference alike.
  const bare = plain('/bin/true');
  const wrapped = plain('/usr/sbin/ip', ['netns', 'exec', podwire.nodeNs, '/bin/true']);
  const pairs = await podwire.driver.run(
    {
      jobs: Array.from({ length: options.calls }, () => [bare, wrapped]),
      concurrency: 1,
      timeoutMs: ctx.execTimeoutMs,
    },
    ctx.teardown.signal,
  );
  const failed = pairs.results.flat().find((r) => r.code !== 0);
  if (failed) throw new Error(`calibration ${failed.tag}: exit ${failed.code}: ${failed.stderr}`);
  const execFloor = summarize(pairs.results.map((job) => (job[0] as ExecResult).ms));
  const netnsExecWrapper = summarize(pairs.results.map((job) => (job[1] as ExecResult).ms));
  const wrapperCost = median(
    pairs.results.map((job) => (job[1] as ExecResult).ms - (job[0] as ExecResult).ms),
  );
  const podwireVersion = await seq(podwire, podwire.call('VERSION', NOBODY));
  const referenceVersion = await seq(reference, reference.call('VERSION', NOBODY));
  const walls: number[] = [];
  for (let i = 0; i < 3; i++) {
    const b = await podwire.driver.run(
      {
        jobs: Array.from({ length: options.burst }, () => [plain('/bin/true')]),
        concurrency: options.burst,
        timeoutMs: ctx.execTimeoutMs,
      },
      ctx.teardown.signal,
    );
    walls.push(b.wallMs);
  }
  return {
    options,
    execFloor,
    netnsExecWrapper,
    wrapperCostMs: Math.round(wrapperCost * 100) / 100,
    podwireVersion,
    referenceVersion,
    burstFloorWallMs: summarize(walls),
  };
}
