/**
 * Label selectors (metav1.LabelSelector) exactly as Kubernetes matches them: every `matchLabels`
 * pair and every `matchExpressions` requirement must hold (AND); both parts empty selects everything.
 * `In` needs the key with one of the values; `NotIn` holds for a value outside the list AND for a
 * missing key; `Exists` and `DoesNotExist` look at the key alone.
 */
import type { LabelSelector, LabelSelectorRequirement } from './model.js';

export type Labels = Readonly<Record<string, string>>;

/** Whether one requirement holds for `labels`. */
export function requirementMatches(req: LabelSelectorRequirement, labels: Labels): boolean {
  const has = Object.hasOwn(labels, req.key);
  switch (req.operator) {
    case 'In':
      return has && req.values.includes(labels[req.key] as string);
    case 'NotIn':
      return !has || !req.values.includes(labels[req.key] as string);
    case 'Exists':
      return has;
    case 'DoesNotExist':
      return !has;
  }
}

/** Whether `selector` selects an object with `labels`. */
export function selectorMatches(selector: LabelSelector, labels: Labels): boolean {
  for (const key in selector.matchLabels) {
    if (!Object.hasOwn(selector.matchLabels, key)) continue;
    if (!Object.hasOwn(labels, key) || labels[key] !== selector.matchLabels[key]) return false;
  }
  for (const req of selector.matchExpressions) if (!requirementMatches(req, labels)) return false;
  return true;
}

/** Whether the selector selects everything (both parts empty). */
export function selectsAll(selector: LabelSelector): boolean {
  return Object.keys(selector.matchLabels).length === 0 && selector.matchExpressions.length === 0;
}

/**
 * A key that is equal for equal selectors (labels and requirements sorted; the values of a
 * requirement are a set), so that the compiler matches each distinct selector once.
 */
export function selectorKey(selector: LabelSelector): string {
  const labels = Object.keys(selector.matchLabels)
    .sort()
    .map((k) => [k, selector.matchLabels[k]]);
  const exprs = selector.matchExpressions
    .map((r) => [r.key, r.operator, [...new Set(r.values)].sort()] as const)
    .map((r) => JSON.stringify(r))
    .sort();
  return JSON.stringify([labels, exprs]);
}
