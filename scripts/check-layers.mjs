#!/usr/bin/env node
// The layer map of docs/architecture.md ("## Layers"), enforced: every relative import in src/ and
// bed/ must go to the importing folder itself (or one of its sub-folders) or to a folder (or file)
// its row allows, and no import cycle may run between files. Run by `npm run lint` and CI.
//
//   node scripts/check-layers.mjs [--root DIR]
//
// Exit 0: clean. Exit 1: each violation printed as FILE:LINE: message. Exit 2: the table is missing
// or malformed.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative, resolve } from 'node:path';

const args = process.argv.slice(2);
const root = resolve(args[0] === '--root' && args[1] ? args[1] : join(import.meta.dirname, '..'));
const DOC = join(root, 'docs/architecture.md');
const CHECKED = ['src', 'bed'];

/** The rows of the Layers table: folder (or file) -> what it may import. */
function readRules() {
  const text = readFileSync(DOC, 'utf8');
  const start = text.search(/^## Layers\s*$/m);
  if (start < 0) fail(`${DOC}: no "## Layers" section`);
  const lines = text.slice(start).split('\n').slice(1);
  const rules = new Map();
  let inTable = false;
  for (const line of lines) {
    if (/^## /.test(line)) break;
    if (!line.startsWith('|')) {
      if (inTable) break;
      continue;
    }
    inTable = true;
    const cells = line
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim());
    if (cells[0] === 'folder' || /^-+$/.test(cells[0] ?? '')) continue;
    const folder = /^`([^`]+)`$/.exec(cells[0] ?? '')?.[1];
    if (!folder) fail(`${DOC}: a Layers row's first cell is not one backticked path: ${line}`);
    const cell = cells[1] ?? '';
    const allowed = cell === '—' ? [] : [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
    if (cell !== '—' && allowed.length === 0) fail(`${DOC}: row ${folder}: "may import" lists nothing`);
    rules.set(folder, allowed);
  }
  if (rules.size === 0) fail(`${DOC}: the Layers table has no rows`);
  return rules;
}

function fail(message) {
  process.stderr.write(`check-layers: ${message}\n`);
  process.exit(2);
}

/** The row governing a repository path: the longest folder (or exact file) that contains it. */
function ruleFor(rules, path) {
  let best;
  for (const key of rules.keys()) {
    const hit = key.endsWith('/') ? path.startsWith(key) : path === key;
    if (hit && (best === undefined || key.length > best.length)) best = key;
  }
  return best;
}

function allowedBy(entry, target) {
  return entry.endsWith('/') ? target.startsWith(entry) : target === entry;
}

function walk(dir, out) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path, out);
    else if (name.endsWith('.ts')) out.push(path);
  }
  return out;
}

const IMPORT = /^\s*(?:import|export)\s+(type\s+)?(?:[^'";]*?\sfrom\s+)?['"](\.{1,2}\/[^'"]+)['"]/gm;
const DYNAMIC = /\bimport\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/g;

const rules = readRules();
const problems = [];
/** file -> files it imports at run time (type-only imports vanish in the output, so no cycle). */
const graph = new Map();
const files = CHECKED.flatMap((d) => {
  try {
    return walk(join(root, d), []);
  } catch {
    return [];
  }
});
for (const file of files) {
  const rel = relative(root, file);
  const rule = ruleFor(rules, rel);
  if (rule === undefined) {
    problems.push(`${rel}:1: no row of the Layers table covers this file`);
    continue;
  }
  const home = rule.endsWith('/') ? rule : `${dirname(rule)}/`;
  const text = readFileSync(file, 'utf8');
  const edges = [];
  const seen = [];
  for (const m of text.matchAll(IMPORT)) seen.push({ spec: m[2], typeOnly: m[1] !== undefined, at: m.index });
  for (const m of text.matchAll(DYNAMIC)) seen.push({ spec: m[1], typeOnly: false, at: m.index });
  for (const { spec, typeOnly, at } of seen) {
    const target = relative(root, normalize(join(dirname(file), spec))).replace(/\.js$/, '.ts');
    const line = text.slice(0, at).split('\n').length;
    if (!typeOnly) edges.push(target);
    if (target.startsWith(home)) continue;
    const allowed = rules.get(rule) ?? [];
    if (!allowed.some((entry) => allowedBy(entry, target))) {
      const targetRule = ruleFor(rules, target) ?? target;
      problems.push(
        `${rel}:${line}: imports ${target}: ${rule} may not import ${targetRule} (docs/architecture.md, "Layers")`,
      );
    }
  }
  graph.set(rel, edges);
}

// Import cycles between files: Tarjan's strongly connected components.
let index = 0;
const stack = [];
const on = new Set();
const idx = new Map();
const low = new Map();
function connect(v) {
  idx.set(v, index);
  low.set(v, index);
  index++;
  stack.push(v);
  on.add(v);
  for (const w of graph.get(v) ?? []) {
    if (!graph.has(w)) continue;
    if (!idx.has(w)) {
      connect(w);
      low.set(v, Math.min(low.get(v), low.get(w)));
    } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
  }
  if (low.get(v) === idx.get(v)) {
    const component = [];
    let w;
    do {
      w = stack.pop();
      on.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || (graph.get(v) ?? []).includes(v)) {
      problems.push(`${component.sort()[0]}:1: import cycle: ${component.sort().join(' -> ')}`);
    }
  }
}
for (const v of graph.keys()) if (!idx.has(v)) connect(v);

for (const p of problems) process.stdout.write(`${p}\n`);
process.stdout.write(
  `check-layers: ${files.length} files, ${rules.size} rows, ${problems.length} problem${problems.length === 1 ? '' : 's'}\n`,
);
process.exit(problems.length > 0 ? 1 : 0);
