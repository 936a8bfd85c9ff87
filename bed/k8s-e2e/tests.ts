/**
 * The test list of the upstream network e2e run (`bed/k8s-e2e/tests.yaml`): which `[sig-network]`
 * tests are skipped and why, which are expected to fail, and the CI subset. Parsed strictly: an
 * entry without a reason, a pattern that is not a regular expression both RE2 (ginkgo) and
 * JavaScript read alike, or an unknown key is an error naming the entry; nothing is half-loaded.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parse } from 'yaml';

export const TESTS_YAML = resolve(import.meta.dirname, '../../../bed/k8s-e2e/tests.yaml');

/** What the running cluster can do that lifts a skip. */
export const CAPABILITIES = ['dual-stack'] as const;
export type Capability = (typeof CAPABILITIES)[number];

export interface Entry {
  pattern: string;
  reason: string;
  /** The skip does not apply on a cluster with this capability. */
  unless?: Capability;
}

export interface TestList {
  skip: Entry[];
  expectedFailures: Entry[];
  subset: string[];
}

/** Syntax JavaScript accepts and RE2 (ginkgo's Go regexp) does not, or reads differently. */
const NOT_RE2 = /\(\?[=!<]|\\[1-9]|\\k<|\(\?<[A-Za-z]/;

function checkPattern(where: string, pattern: unknown): string {
  if (typeof pattern !== 'string' || pattern.trim() === '')
    throw new Error(`${where}: pattern must be a non-empty string`);
  if (pattern.startsWith('^')) {
    throw new Error(
      `${where}: pattern ${pattern} is anchored with ^; ginkgo matches a text that starts with a space`,
    );
  }
  if (NOT_RE2.test(pattern))
    throw new Error(`${where}: pattern ${pattern} uses look-around or a back-reference (not RE2)`);
  try {
    new RegExp(pattern);
  } catch (err) {
    throw new Error(`${where}: pattern ${pattern} is not a regular expression: ${(err as Error).message}`);
  }
  return pattern;
}

function checkEntry(where: string, raw: unknown, allowUnless: boolean): Entry {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    throw new Error(`${where}: not a mapping`);
  const e = raw as Record<string, unknown>;
  const known = allowUnless ? ['pattern', 'reason', 'unless'] : ['pattern', 'reason'];
  for (const k of Object.keys(e)) if (!known.includes(k)) throw new Error(`${where}: unknown key ${k}`);
  const pattern = checkPattern(where, e.pattern);
  if (typeof e.reason !== 'string' || e.reason.trim() === '')
    throw new Error(`${where} (${pattern}): no reason`);
  const entry: Entry = { pattern, reason: e.reason.trim() };
  if (e.unless !== undefined) {
    if (!CAPABILITIES.includes(e.unless as Capability)) {
      throw new Error(
        `${where} (${pattern}): unless must be one of ${CAPABILITIES.join(', ')}, not ${String(e.unless)}`,
      );
    }
    entry.unless = e.unless as Capability;
  }
  return entry;
}

function list(doc: Record<string, unknown>, key: string): unknown[] {
  const v = doc[key];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new Error(`${key}: not a list`);
  return v;
}

/** Parses the YAML text of a test list; throws on anything malformed. */
export function parseTestList(text: string): TestList {
  const doc = parse(text) as unknown;
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc))
    throw new Error('the test list is not a mapping');
  const d = doc as Record<string, unknown>;
  for (const k of Object.keys(d)) {
    if (!['skip', 'expectedFailures', 'subset'].includes(k)) throw new Error(`unknown key ${k}`);
  }
  return {
    skip: list(d, 'skip').map((e, i) => checkEntry(`skip[${i}]`, e, true)),
    expectedFailures: list(d, 'expectedFailures').map((e, i) =>
      checkEntry(`expectedFailures[${i}]`, e, false),
    ),
    subset: list(d, 'subset').map((p, i) => checkPattern(`subset[${i}]`, p)),
  };
}

export function loadTestList(path = TESTS_YAML): TestList {
  return parseTestList(readFileSync(path, 'utf8'));
}

/** The skips in force on a cluster with these capabilities. */
export function activeSkips(tests: TestList, caps: ReadonlySet<Capability>): Entry[] {
  return tests.skip.filter((e) => e.unless === undefined || !caps.has(e.unless));
}

/** One regular expression for ginkgo's --ginkgo.skip / --ginkgo.focus: the patterns as alternatives. */
export function alternation(patterns: readonly string[]): string {
  return patterns.map((p) => `(?:${p})`).join('|');
}

/** The first entry whose pattern matches a test's full name. */
export function matching(entries: readonly Entry[], name: string): Entry | undefined {
  return entries.find((e) => new RegExp(e.pattern).test(name));
}
