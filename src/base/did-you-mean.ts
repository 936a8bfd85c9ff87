/** "Did you mean …?" for a misspelt key: the known one closest by edit distance, if close enough. */

/** The closest of `known` to `given`, when at most a third of its letters (and at least 1) differ. */
export function closest(given: string, known: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const k of known) {
    const d = distance(given.toLowerCase(), k.toLowerCase());
    if (d < bestDistance) {
      best = k;
      bestDistance = d;
    }
  }
  return bestDistance <= Math.max(1, Math.floor(given.length / 3)) ? best : undefined;
}

/** Levenshtein distance (insertions, deletions, substitutions), two rows at a time. */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const sub = (prev[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1);
      row.push(Math.min(sub, (prev[j] as number) + 1, (row[j - 1] as number) + 1));
    }
    prev = row;
  }
  return prev[b.length] as number;
}

/** " (did you mean X?)" or "". */
export function didYouMean(given: string, known: Iterable<string>): string {
  const k = closest(given, known);
  return k === undefined ? '' : ` (did you mean ${k}?)`;
}
