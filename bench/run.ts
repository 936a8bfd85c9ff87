/**
 * `npm run bench [-- OPTIONS]`: podwire against the reference bridge + host-local plugins, side by
 * side in one run. Needs root (it creates network namespaces, all named pwt-*, and removes them).
 *
 *   --quick              small counts (about a minute)
 *   --json               the report as JSON on stdout (progress stays on stderr)
 *   --scenarios 1,2,5    only these (0 = floors/calibration, 1 sequential, 2 bursts, 3 soak, 4 OVS, 5 scale)
 *   --pods N             scenario 1 pod count
 *   --soak-cycles N      scenario 3 cycle count
 *   --agent-flags "..."  node flags for the agent, space-separated (e.g. "--max-semi-space-size=16")
 *   --profile DIR        instead: scenario 2 on podwire with the agent under --cpu-prof, profile summarised
 *   --deadline-s N       stop (and clean up) after N seconds
 *
 * Exit status: 0, or 1 when a "must" check failed (a failed call, a descriptor leak), 2 on bad usage,
 * 3 when the run could not complete (set-up failure, signal, deadline).
 */
import { type BenchOptions, FULL, QUICK, runBench } from './bench.js';
import { formatSummary } from './cpuprofile.js';
import { detailTables, mainTable } from './report.js';

function parseArgs(argv: string[]): { options: BenchOptions; json: boolean } {
  const options: BenchOptions = { ...(argv.includes('--quick') ? QUICK : FULL) };
  let json = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value`);
      return v;
    };
    const count = (): number => {
      const v = value();
      const n = Number(v);
      if (!Number.isInteger(n) || n <= 0) throw new Error(`${arg} ${v}: not a positive integer`);
      return n;
    };
    switch (arg) {
      case '--quick':
        break;
      case '--json':
        json = true;
        break;
      case '--scenarios':
        options.scenarios = value()
          .split(',')
          .map((s) => Number(s));
        if (options.scenarios.some((n) => !Number.isInteger(n) || n < 0 || n > 5))
          throw new Error('--scenarios: numbers from 0 to 5');
        break;
      case '--pods':
        options.pods = count();
        break;
      case '--soak-cycles':
        options.soakCycles = count();
        break;
      case '--agent-flags':
        options.agentFlags = value()
          .split(' ')
          .filter((f) => f !== '');
        break;
      case '--profile':
        options.profileDir = value();
        break;
      case '--deadline-s':
        options.deadlineMs = count() * 1000;
        break;
      default:
        throw new Error(`unknown option ${arg}`);
    }
  }
  return { options, json };
}

async function main(): Promise<number> {
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`bench: ${err instanceof Error ? err.message : String(err)}\n`);
    return 2;
  }
  const { options, json } = parsed;
  const started = Date.now();
  const report = await runBench(options, (msg) =>
    process.stderr.write(`[bench ${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${msg}\n`),
  );
  if (json) {
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } else {
    const meta = Object.entries(report.meta).map(([k, v]) => `${k}: ${v}`);
    const out = [meta.join('\n'), '', mainTable(report), '', detailTables(report)];
    if (report.profile) out.push(`profile ${report.profile.file}`, formatSummary(report.profile.summary));
    process.stdout.write(`${out.join('\n')}\n`);
  }
  return report.checks.some((c) => c.kind === 'must' && !c.ok) ? 1 : 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    const cause =
      err instanceof Error && err.cause instanceof Error ? `\n  (then: ${err.cause.message})` : '';
    const stopped = err instanceof Error && err.message.startsWith('bench stopped');
    const text =
      err instanceof Error ? (cause || stopped ? err.message : (err.stack ?? err.message)) : String(err);
    process.stderr.write(`bench: ${text}${cause}\n`);
    process.exitCode = 3;
  },
);
