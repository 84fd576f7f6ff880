// Conformance check (not a test): the cel-spec conformance suite (its "simple" tests, as published in
// @bufbuild/cel-spec) run against @marcbachmann/cel-js, the CEL the ledger policy uses, which claims
// "most of the CEL spec" without running the suite itself. Only the tests that need no protobuf
// message types (no protobuf wrapper or message literal), no container, no bindings and no extension
// (macros2 is the two-variable comprehensions extension) are run; values are compared by CEL type (int, uint,
// double, string, bytes, bool, null, list, map; map keys as text). Prints the pass rate per section.
// Run: npx vite-node bench/cel-conformance.ts [--failures]
import { Environment } from '@marcbachmann/cel-js';
import { tests } from '@bufbuild/cel-spec/testdata/conformance.js';

const SECTIONS = new Set([
  'basic',
  'comparisons',
  'conversions',
  'fp_math',
  'integer_math',
  'lists',
  'logic',
  'macros',
  'parse',
  'plumbing',
  'string',
  'timestamps',
  'fields',
]);
const SHOW_FAILURES = process.argv.includes('--failures');

type Json = Record<string, unknown>;
type Normal = string | number | boolean | null | Normal[] | { [key: string]: Normal };

/** An expected cel.expr.Value (protobuf JSON), or undefined when this check cannot compare it. */
function expected(value: Json): Normal | undefined {
  if ('int64Value' in value) return `int:${String(value.int64Value)}`;
  if ('uint64Value' in value) return `uint:${String(value.uint64Value)}`;
  if ('doubleValue' in value) return `double:${Number(value.doubleValue)}`;
  if ('stringValue' in value) return `string:${String(value.stringValue)}`;
  if ('boolValue' in value) return Boolean(value.boolValue);
  if ('nullValue' in value) return null;
  if ('bytesValue' in value) return `bytes:${String(value.bytesValue)}`;
  if ('listValue' in value) {
    const items = ((value.listValue as Json).values as Json[] | undefined) ?? [];
    const normal = items.map(expected);
    return normal.includes(undefined) ? undefined : (normal as Normal[]);
  }
  if ('mapValue' in value) {
    const entries = ((value.mapValue as Json).entries as Json[] | undefined) ?? [];
    const out: Record<string, Normal> = {};
    for (const entry of entries) {
      const key = expected(entry.key as Json);
      const item = expected(entry.value as Json);
      if (key === undefined || item === undefined) return undefined;
      out[typeof key === 'string' ? key.replace(/^[a-z]+:/, '') : JSON.stringify(key)] = item;
    }
    return out;
  }
  return undefined; // types, enums, messages, durations, timestamps as values
}

/** A value's own text (cel-js's UnsignedInt, Duration and Date all have one). */
const ownText = (value: unknown): string => (value as { toString(): string }).toString();

function actual(value: unknown): Normal | undefined {
  if (typeof value === 'bigint') return `int:${value}`;
  if (typeof value === 'number') return `double:${value}`;
  if (typeof value === 'string') return `string:${value}`;
  if (typeof value === 'boolean' || value === null) return value;
  if (value instanceof Uint8Array) return `bytes:${Buffer.from(value).toString('base64')}`;
  if (Array.isArray(value)) return value.map((item) => actual(item) ?? '?');
  if (value instanceof Map) return Object.fromEntries([...value].map(([k, v]) => [String(k), actual(v) ?? '?']));
  if (value !== null && typeof value === 'object' && value.constructor?.name === 'UnsignedInt')
    return `uint:${ownText(value)}`;
  if (value !== null && typeof value === 'object' && value.constructor === Object)
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, actual(v) ?? '?']));
  return `other:${ownText(value)}`;
}

interface Tally {
  run: number;
  passed: number;
  skipped: number;
  failures: string[];
}

function runTest(test: Json, tally: Tally): void {
  const expression = String(test.expr);
  const needsMessages = /google\.protobuf\.|cel\.expr\.|TestAllTypes|NestedMessage/.test(expression);
  if (
    needsMessages ||
    test.container !== undefined ||
    test.bindings !== undefined ||
    test.typeEnv !== undefined ||
    test.disableMacros
  ) {
    tally.skipped++;
    return;
  }
  const wantsError = test.evalError !== undefined;
  const want = wantsError ? undefined : expected((test.value as Json | undefined) ?? {});
  if (!wantsError && want === undefined) {
    tally.skipped++;
    return;
  }
  tally.run++;
  const name = `${String(test.name)}: ${String(test.expr)}`;
  try {
    const got = actual(new Environment({ homogeneousAggregateLiterals: false }).evaluate(String(test.expr)));
    if (!wantsError && JSON.stringify(got) === JSON.stringify(want)) tally.passed++;
    else
      tally.failures.push(
        `${name} => ${JSON.stringify(got)}, expected ${wantsError ? 'an error' : JSON.stringify(want)}`,
      );
  } catch (error) {
    if (wantsError) tally.passed++;
    else tally.failures.push(`${name} => error ${String((error as Error).message).split('\n')[0]}`);
  }
}

type Suite = { name: string; suites?: Suite[]; tests?: { original: Json }[] };
const rows: Record<string, string | number>[] = [];
const total: Tally = { run: 0, passed: 0, skipped: 0, failures: [] };
for (const section of (tests as Suite).suites ?? []) {
  if (!SECTIONS.has(section.name)) continue;
  const tally: Tally = { run: 0, passed: 0, skipped: 0, failures: [] };
  const walk = (suite: Suite) => {
    for (const test of suite.tests ?? []) runTest(test.original, tally);
    for (const inner of suite.suites ?? []) walk(inner);
  };
  walk(section);
  rows.push({
    section: section.name,
    run: tally.run,
    passed: tally.passed,
    skipped: tally.skipped,
    rate: `${((100 * tally.passed) / Math.max(1, tally.run)).toFixed(1)}%`,
  });
  total.run += tally.run;
  total.passed += tally.passed;
  total.skipped += tally.skipped;
  total.failures.push(...tally.failures.map((failure) => `${section.name}/${failure}`));
}
rows.push({
  section: 'all',
  run: total.run,
  passed: total.passed,
  skipped: total.skipped,
  rate: `${((100 * total.passed) / total.run).toFixed(1)}%`,
});
console.table(rows);
if (SHOW_FAILURES) for (const failure of total.failures) console.log(failure);
