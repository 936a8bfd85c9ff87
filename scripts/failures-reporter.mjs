/**
 * A node:test reporter that prints, once the run is over, only the tests that failed (a `todo` that
 * fails is not one): file, name and the error's first lines. `npm test` runs it beside TAP so that the
 * end of a long CI log names what failed.
 */
export default async function* failures(source) {
  const failed = [];
  for await (const event of source) {
    if (event.type !== 'test:fail' || event.data.todo !== undefined) continue;
    const { name, file, details } = event.data;
    const error = details?.error;
    // A file or suite that failed because a test in it did adds nothing to that test's line.
    if (error?.failureType === 'subtestsFailed') continue;
    const cause = error?.cause ?? error;
    const message = String(cause?.message ?? cause ?? '')
      .split('\n')
      .slice(0, 6)
      .join('\n      ');
    failed.push(`  ${file ?? '?'}\n    ${name}\n      ${message}`);
  }
  if (failed.length === 0) return;
  yield `\n# ${failed.length} failed:\n${failed.join('\n')}\n`;
}
