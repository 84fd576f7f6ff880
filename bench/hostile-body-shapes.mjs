// The worst bodies for a rule-checked route (POST /v2/updates/update-by-offset), each filled to a
// given size: the shapes that cost most to parse or to keep, for the body benchmark
// (bench/hostile-bodies.mjs) and the reliability test (test/reliability/hostile-bodies.test.ts).

export const UPDATE_BY_OFFSET_PATH = '/v2/updates/update-by-offset';

const FORMAT =
  '"updateFormat":{"includeTransactions":{"eventFormat":{"filtersByParty":{"Alice::1220ab":{"cumulative":[]}}},"transactionShape":"TRANSACTION_SHAPE_ACS_DELTA"}}';

/** `{"offset":N,<format>,"x":<open><unit><sep><unit>...<close>}`, as many units as fit in `size` bytes. */
function filled(size, { offset = 5, open, unit, separator = ',', close }) {
  const head = `{"offset":${offset},${FORMAT},"x":${open}`;
  const tail = `${close}}`;
  const room = size - head.length - tail.length;
  const each = typeof unit === 'function' ? unit : () => unit;
  const parts = [];
  let used = 0;
  for (let i = 0; ; i++) {
    const next = each(i);
    const cost = next.length + (i === 0 ? 0 : separator.length);
    if (used + cost > room) break;
    parts.push(next);
    used += cost;
  }
  return head + parts.join(separator) + tail;
}

/** Nested `depth` levels deep: `[[...]]`. */
const nested = (depth) => `${'['.repeat(depth)}${']'.repeat(depth)}`;

/**
 * The shapes, each `size` bytes or just under: name, what it is, and the body. `maxDepth` is the
 * deepest nesting the gateway allows (policy.maxBodyDepth); the body's own object and the `x` member
 * take two levels.
 */
export function hostileBodies(size, maxDepth = 512) {
  return [
    {
      name: 'floats',
      what: 'one array of 1.5 (the crash of issue 24: every number non-plain)',
      body: filled(size, { open: '[', unit: '1.5', close: ']' }),
    },
    {
      name: 'floats, offset 0',
      what: 'the same, with an offset the gateway refuses itself',
      body: filled(size, { offset: 0, open: '[', unit: '1.5', close: ']' }),
    },
    { name: 'integers', what: 'one array of 1', body: filled(size, { open: '[', unit: '1', close: ']' }) },
    {
      name: 'int64s',
      what: 'one array of 20-digit integers (no double holds them)',
      body: filled(size, { open: '[', unit: '12345678901234567890', close: ']' }),
    },
    { name: 'short strings', what: 'one array of "a"', body: filled(size, { open: '[', unit: '"a"', close: ']' }) },
    {
      name: 'escaped string',
      what: 'one string of \\u0041 escapes',
      body: filled(size, { open: '"', unit: '\\u0041', separator: '', close: '"' }),
    },
    {
      name: 'keys',
      what: 'one object with distinct keys',
      body: filled(size, { open: '{', unit: (i) => `"k${i}":0`, close: '}' }),
    },
    { name: 'empty objects', what: 'one array of {}', body: filled(size, { open: '[', unit: '{}', close: ']' }) },
    {
      name: 'depth',
      what: `arrays nested ${maxDepth} deep in all (the most allowed), side by side`,
      body: filled(size, { open: '[', unit: nested(maxDepth - 2), close: ']' }),
    },
    {
      name: 'too deep',
      what: 'one array nesting far past policy.maxBodyDepth (refused)',
      body: filled(size, { open: '', unit: nested(Math.floor((size - 400) / 2)), close: '' }),
    },
  ];
}
