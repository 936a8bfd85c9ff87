/**
 * Reads a V8 `.cpuprofile` (what `node --cpu-prof` writes) and says where the time went: self time by
 * function, by area of the code (netlink, IPAM store, logging, JSON, node core, ...) and the total
 * (inclusive) time of the functions on the stack. `(idle)` is the event loop waiting: for the kernel,
 * a timer, or the next request; the CPU work is everything else.
 *
 * Usage: node dist/bench/cpuprofile.js FILE.cpuprofile [--top N]
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface Entry {
  name: string;
  ms: number;
  /** Share of the busy (non-idle) time, in percent. */
  pct: number;
}

export interface ProfileSummary {
  wallMs: number;
  idleMs: number;
  busyMs: number;
  selfByFunction: Entry[];
  selfByArea: Entry[];
  /**
   * Self time charged to the innermost agent function (dist/src) on the stack: the node core,
   * builtins and FFI calls it made count as its own. Says which agent code the CPU went to.
   */
  byAgentFunction: Entry[];
  /** Time with the function anywhere on the stack (synchronous stacks only: an await ends a stack). */
  totalByFunction: Entry[];
}

/** The project root (this file runs from dist/bench/), stripped from the URLs in the report. */
const ROOT = `${resolve(import.meta.dirname, '../..')}/`;

/** Which part of the system a frame belongs to; the order of the tests matters. */
export function areaOf(f: CallFrame): string {
  const { functionName: fn, url } = f;
  if (fn === '(idle)' || fn === '(program)' || fn === '(garbage collector)' || fn === '(root)') return fn;
  if (url === '')
    return fn === 'stringify' || fn === 'parse' ? 'JSON (builtin)' : `builtin ${fn || '(anonymous)'}`;
  if (url.includes('/node_modules/koffi/')) return 'koffi (FFI calls into libc)';
  if (url.includes('/node_modules/')) return `dependency ${url.split('/node_modules/')[1]?.split('/')[0]}`;
  const src = /\/dist\/src\/([^/]+)\/(?:([^/]+)\/)?/.exec(url);
  if (src) {
    const [, layer, sub] = src;
    if (layer === 'kernel' && sub === 'netlink') return 'src/kernel/netlink (rtnetlink codec, socket)';
    if (url.endsWith('/agent/log.js')) return 'src/agent/log (logging)';
    return `src/${layer}`;
  }
  if (url.startsWith('node:'))
    return `node core ${
      url
        .slice(5)
        .replace(/^internal\//, '')
        .split('/')[0]
    }`;
  return url;
}

function frameName(f: CallFrame): string {
  const fn = f.functionName || '(anonymous)';
  if (f.url === '') return fn;
  const at = f.url.replace(/^file:\/\//, '').replace(ROOT, '');
  return `${fn} ${at}:${f.lineNumber + 1}`;
}

function top(map: Map<string, number>, busyMs: number, n: number): Entry[] {
  return [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([name, us]) => ({
      name,
      ms: Math.round(us / 100) / 10,
      pct: Math.round((us / 1000 / busyMs) * 1000) / 10,
    }));
}

export function summarizeProfile(p: CpuProfile, n = 25): ProfileSummary {
  const byId = new Map(p.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of p.nodes) for (const c of node.children ?? []) parent.set(c, node.id);
  const self = new Map<string, number>();
  const area = new Map<string, number>();
  const total = new Map<string, number>();
  const agentFn = new Map<string, number>();
  let idleUs = 0;
  let allUs = 0;
  p.samples.forEach((id, i) => {
    const us = p.timeDeltas[i] ?? 0;
    const node = byId.get(id);
    if (!node) return;
    allUs += us;
    if (node.callFrame.functionName === '(idle)') {
      idleUs += us;
      return;
    }
    const name = frameName(node.callFrame);
    self.set(name, (self.get(name) ?? 0) + us);
    const a = areaOf(node.callFrame);
    area.set(a, (area.get(a) ?? 0) + us);
    // Each function counts once per sample, however often it recurses.
    const seen = new Set<string>();
    let charged = false;
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const f = byId.get(cur)?.callFrame;
      if (!f || f.functionName === '(root)') continue;
      seen.add(frameName(f));
      if (!charged && f.url.includes('/dist/src/')) {
        agentFn.set(frameName(f), (agentFn.get(frameName(f)) ?? 0) + us);
        charged = true;
      }
    }
    if (!charged)
      agentFn.set(`(outside agent code) ${a}`, (agentFn.get(`(outside agent code) ${a}`) ?? 0) + us);
    for (const s of seen) total.set(s, (total.get(s) ?? 0) + us);
  });
  const busyMs = (allUs - idleUs) / 1000;
  return {
    wallMs: Math.round(allUs / 1000),
    idleMs: Math.round(idleUs / 1000),
    busyMs: Math.round(busyMs),
    selfByFunction: top(self, busyMs, n),
    selfByArea: top(area, busyMs, n),
    byAgentFunction: top(agentFn, busyMs, n),
    totalByFunction: top(total, busyMs, n),
  };
}

export function readProfile(path: string): CpuProfile {
  return JSON.parse(readFileSync(path, 'utf8')) as CpuProfile;
}

export function formatSummary(s: ProfileSummary): string {
  const rows = (title: string, entries: Entry[]): string =>
    [
      `${title}`,
      ...entries.map(
        (e) => `  ${e.ms.toFixed(1).padStart(9)} ms ${e.pct.toFixed(1).padStart(5)}%  ${e.name}`,
      ),
    ].join('\n');
  return [
    `profile: ${s.wallMs} ms sampled, ${s.idleMs} ms idle (event loop waiting), ${s.busyMs} ms busy; % of busy`,
    rows('self time by area:', s.selfByArea),
    rows('self time by function:', s.selfByFunction),
    rows('self time charged to the innermost agent function:', s.byAgentFunction),
    rows('total time by function (synchronous stacks):', s.totalByFunction),
  ].join('\n');
}

if (process.argv[1] && import.meta.filename === process.argv[1]) {
  const [file, flag, count] = process.argv.slice(2);
  if (!file) {
    process.stderr.write('usage: node dist/bench/cpuprofile.js FILE.cpuprofile [--top N]\n');
    process.exit(2);
  }
  process.stdout.write(
    `${formatSummary(summarizeProfile(readProfile(file), flag === '--top' ? Number(count) : 25))}\n`,
  );
}
