/**
 * The JUnit XML reports ginkgo v1 writes (`--report-dir`: `junit_NN.xml`, one per parallel node):
 * each `<testcase name=... time=...>` with a `<skipped>`, a `<failure message=...>` (or `<error>`)
 * or nothing (passed). Only that shape is read; a file without a `<testsuite>` is an error.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export type Outcome = 'passed' | 'failed' | 'skipped';

export interface TestCase {
  name: string;
  outcome: Outcome;
  seconds: number;
  /** The failure's message and text, for a failed test. */
  failure?: string;
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

export function decodeXml(text: string): string {
  return text.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-z]+);/g, (whole, ref: string) => {
    if (ref.startsWith('#x')) return String.fromCodePoint(Number.parseInt(ref.slice(2), 16));
    if (ref.startsWith('#')) return String.fromCodePoint(Number.parseInt(ref.slice(1), 10));
    return ENTITIES[ref] ?? whole;
  });
}

function attributes(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of text.matchAll(/([A-Za-z_:][-A-Za-z0-9_:.]*)\s*=\s*"([^"]*)"/g))
    out.set(m[1] ?? '', decodeXml(m[2] ?? ''));
  return out;
}

/** The test cases of one JUnit XML document. */
export function parseJUnit(xml: string): TestCase[] {
  if (!/<testsuite[\s>]/.test(xml)) throw new Error('not a JUnit report: no <testsuite>');
  const cases: TestCase[] = [];
  for (const m of xml.matchAll(/<testcase\b([^>]*?)(?:\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const attrs = attributes(m[1] ?? '');
    const body = m[2] ?? '';
    const name = attrs.get('name');
    if (name === undefined) throw new Error(`a <testcase> without a name: ${(m[0] ?? '').slice(0, 120)}`);
    const seconds = Number(attrs.get('time') ?? '0');
    const failed = /<(failure|error)\b([^>]*?)(?:\/>|>([\s\S]*?)<\/\1>)/.exec(body);
    if (failed) {
      const message = attributes(failed[2] ?? '').get('message') ?? '';
      const text = decodeXml(failed[3] ?? '').trim();
      cases.push({
        name,
        outcome: 'failed',
        seconds,
        failure: [message, text].filter((s) => s !== '').join('\n'),
      });
    } else {
      cases.push({ name, outcome: /<skipped\b/.test(body) ? 'skipped' : 'passed', seconds });
    }
  }
  return cases;
}

/** Every `junit*.xml` in a report directory, in name order. */
export function readReports(dir: string): TestCase[] {
  const files = readdirSync(dir)
    .filter((f) => /^junit.*\.xml$/.test(f))
    .sort();
  return files.flatMap((f) => parseJUnit(readFileSync(join(dir, f), 'utf8')));
}
