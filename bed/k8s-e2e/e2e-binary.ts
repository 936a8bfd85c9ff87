/**
 * The upstream e2e binary and ginkgo CLI that scripts/k8s-build.sh builds (decision 36), and the
 * list of tests a focus selects, from a dry run (`--ginkgo.dryRun`: nothing runs, no cluster is
 * needed, about 4 s): the names of the test cases its JUnit report does not mark skipped.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { run } from '../../src/process/run.js';
import { readReports } from './junit.js';

export const REPO = resolve(import.meta.dirname, '../../..');

/** The bin directory of a complete Kubernetes build, or undefined when there is none. */
export function k8sBinDir(): string | undefined {
  const r = spawnSync(join(REPO, 'scripts/k8s-build.sh'), ['--print-dir'], { encoding: 'utf8' });
  const dir = r.status === 0 ? r.stdout.trim() : '';
  return dir !== '' && existsSync(join(dir, 'e2e.test')) ? dir : undefined;
}

/** The full names of the tests `focus` selects and `skip` leaves, as the JUnit report names them. */
export async function dryRunNames(e2eTest: string, focus: string, skip?: string): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), 'pw-e2e-dry-'));
  try {
    const r = await run(
      e2eTest,
      [
        '--ginkgo.dryRun',
        `--ginkgo.focus=${focus}`,
        ...(skip === undefined ? [] : [`--ginkgo.skip=${skip}`]),
        '--ginkgo.noColor',
        `--report-dir=${dir}`,
        '--provider=local',
      ],
      { timeoutMs: 120_000 },
    );
    if (r.code !== 0)
      throw new Error(`${e2eTest} --ginkgo.dryRun exited ${r.code}: ${r.stderr.slice(-2000)}`);
    return readReports(dir)
      .filter((c) => c.outcome !== 'skipped')
      .map((c) => c.name)
      .sort();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
