/** Summary statistics of latencies (milliseconds). Percentiles use the nearest-rank definition. */

export interface Stats {
  n: number;
  median: number;
  p99: number;
  min: number;
  max: number;
  mean: number;
}

/** Nearest rank: the smallest sample with at least `q` of the samples at or below it. */
export function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.max(1, Math.ceil(q * sorted.length));
  return sorted[rank - 1] as number;
}

export function median(samples: readonly number[]): number {
  const s = [...samples].sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

export function summarize(samples: readonly number[]): Stats {
  const s = [...samples].sort((a, b) => a - b);
  const round = (x: number): number => Math.round(x * 100) / 100;
  return {
    n: s.length,
    median: round(median(s)),
    p99: round(percentile(s, 0.99)),
    min: round(s[0] ?? Number.NaN),
    max: round(s[s.length - 1] ?? Number.NaN),
    mean: round(s.reduce((a, b) => a + b, 0) / (s.length || Number.NaN)),
  };
}

/** a / b rounded to two decimals; NaN when either side is missing. */
export function ratio(a: number, b: number): number {
  return Math.round((a / b) * 100) / 100;
}
