// The worst bodies for a rule-checked route (POST /v2/updates/update-by-offset), each filled to a
// given size: the shapes that cost most to parse or to keep, for the body benchmark
// (bench/hostile-bodies.mjs) and the reliability test (test/reliability/hostile-bodies.test.ts); the
// same shapes in a submission (POST /v2/commands/submit-and-wait) for a caller a ledger policy names.

export const UPDATE_BY_OFFSET_PATH = '/v2/updates/update-by-offset';
export const SUBMIT_AND_WAIT_PATH = '/v2/commands/submit-and-wait';

const FORMAT =
  '"updateFormat":{"includeTransactions":{"eventFormat":{"filtersByParty":{"Alice::1220ab":{"cumulative":[]}}},"transactionShape":"TRANSACTION_SHAPE_ACS_DELTA"}}';

/** An update-by-offset request's fields before the shape's `x`. */
const updateFields = (offset) => `"offset":${offset},${FORMAT}`;

/** `{<fields>,"x":<open><unit><sep><unit>...<close>}`, as many units as fit in `size` bytes. */
function filled(size, { offset = 5, open, unit, separator = ',', close }, fields = updateFields) {
  const head = `{${fields(offset)},"x":${open}`;
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
export function hostileBodies(size, maxDepth = 512, fields = updateFields) {
  return [
    {
      name: 'floats',
      what: 'one array of 1.5 (the crash of issue 24: every number non-plain)',
      body: filled(size, { open: '[', unit: '1.5', close: ']' }, fields),
    },
    {
      name: 'floats, offset 0',
      what: 'the same, with an offset the gateway refuses itself',
      body: filled(size, { offset: 0, open: '[', unit: '1.5', close: ']' }, fields),
    },
    { name: 'integers', what: 'one array of 1', body: filled(size, { open: '[', unit: '1', close: ']' }, fields) },
    {
      name: 'int64s',
      what: 'one array of 20-digit integers (no double holds them)',
      body: filled(size, { open: '[', unit: '12345678901234567890', close: ']' }, fields),
    },
    {
      name: 'short strings',
      what: 'one array of "a"',
      body: filled(size, { open: '[', unit: '"a"', close: ']' }, fields),
    },
    {
      name: 'escaped string',
      what: 'one string of \\u0041 escapes',
      body: filled(size, { open: '"', unit: '\\u0041', separator: '', close: '"' }, fields),
    },
    {
      name: 'keys',
      what: 'one object with distinct keys',
      body: filled(size, { open: '{', unit: (i) => `"k${i}":0`, close: '}' }, fields),
    },
    {
      name: 'empty objects',
      what: 'one array of {}',
      body: filled(size, { open: '[', unit: '{}', close: ']' }, fields),
    },
    {
      name: 'depth',
      what: `arrays nested ${maxDepth} deep in all (the most allowed), side by side`,
      body: filled(size, { open: '[', unit: nested(maxDepth - 2), close: ']' }, fields),
    },
    {
      name: 'too deep',
      what: 'one array nesting far past policy.maxBodyDepth (refused)',
      body: filled(size, { open: '', unit: nested(Math.floor((size - 400) / 2)), close: '' }, fields),
    },
  ];
}

/**
 * The shapes in a JsCommands submission of `userId` (one create as Alice, the shape beside it in `x`),
 * for a caller a ledger policy names (bench/hostile-bodies.mjs --governed); no offset, so no
 * "floats, offset 0".
 */
export function hostileSubmissions(size, userId, maxDepth = 512) {
  const create = '{"CreateCommand":{"templateId":"#app:Iou:Iou","createArguments":{"owner":"Alice::1220"}}}';
  const rest = `"commandId":"bench","actAs":["Alice::1220"],"userId":"${userId}"`;
  const fields = () => `"commands":[${create}],${rest}`;
  const head = '{"commands":[';
  const creates = Math.floor((size - head.length - rest.length - 3) / (create.length + 1));
  return [
    ...hostileBodies(size, maxDepth, fields).filter((shape) => shape.name !== 'floats, offset 0'),
    {
      name: 'creates',
      what: 'as many small create commands as fit (the largest decision document)',
      body: `${head}${Array(creates).fill(create).join(',')}],${rest}}`,
    },
  ];
}
