/**
 * The profile run: scenario 2 (bursts) against podwire alone, with the agent under
 * `node --cpu-prof --cpu-prof-dir=DIR`. The agent is stopped with SIGTERM so that it exits cleanly and
 * V8 writes the profile, which is then summarised (cpuprofile.ts). The profile file stays in DIR.
 */
import { mkdirSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type ProfileSummary, readProfile, summarizeProfile } from './cpuprofile.js';
import type { BenchContext } from './scenario.js';
import { type BurstOptions, type BurstResult, runBurst } from './scenarios/burst.js';
import { startPodwire } from './subjects.js';

export interface ProfileResult {
  file: string;
  burst: BurstResult;
  summary: ProfileSummary;
}

export async function runProfile(
  ctx: BenchContext,
  dir: string,
  options: BurstOptions,
): Promise<ProfileResult> {
  const out = resolve(dir);
  mkdirSync(out, { recursive: true });
  const before = new Set(readdirSync(out));
  const podwire = await startPodwire(ctx.teardown, { ...ctx.podwire, cpuProfDir: out });
  const burst = await runBurst(ctx, options, { subjects: [podwire] });
  await podwire.agent?.stop();
  const written = readdirSync(out)
    .filter((f) => f.endsWith('.cpuprofile') && !before.has(f))
    .map((f) => join(out, f))
    .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
  const file = written[0];
  if (!file) throw new Error(`the agent wrote no .cpuprofile in ${out}`);
  return { file, burst, summary: summarizeProfile(readProfile(file)) };
}
