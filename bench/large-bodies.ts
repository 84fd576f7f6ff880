// Micro-benchmark (not a test): the CPU to judge a 4 MiB rule-checked submission
// (submit-and-wait-for-transaction) parsed on the event loop, as bodies up to 1 MiB are, and through
// the large-body pool's worker thread (src/policy/large-body-pool.ts), as larger ones are: the whole
// process's CPU per body (every thread) and the main thread's busy time per body. Paired rounds: both
// variants in each round, their order rotating; a ratio is the median of the rounds' ratios.
// Run: npm run bench:large-bodies (builds dist/ first: the pool's worker is the built one).
import { performance } from 'node:perf_hooks';
import { decodeBody } from '../src/body/charset.js';
import { parseJsonObject } from '../src/body/json.js';
import { createLargeBodyPool, LARGE_BODY_POOL } from '../src/policy/large-body-pool.js';
import { REQUEST_RULES } from '../src/policy/rules/index.js';

const SIZE = 4 * 1024 * 1024;
const ROUNDS = 9;
const PER_ROUND = 8;
const OPERATION = 'submitAndWaitForTransaction';
const PATH = '/v2/commands/submit-and-wait-for-transaction';
const principal = { subject: 'alice', issuer: undefined, claims: {} };

/** A submission of about SIZE bytes: `disclosed` 3 KB blobs, or `commands` of small creates. */
function submission(shape: 'disclosed' | 'commands'): string {
  const unit =
    shape === 'disclosed'
      ? `{"templateId":"#app:Iou:Iou","contractId":"00ab","createdEventBlob":"${'Y2FudG9u'.repeat(384)}","synchronizerId":""}`
      : '{"CreateCommand":{"templateId":"#app:Iou:Iou","createArguments":{"owner":"Alice::1220","amount":"10.0"}}}';
  const units = Array.from({ length: Math.floor(SIZE / (unit.length + 1)) }, () => unit).join(',');
  const create = '{"CreateCommand":{"templateId":"#app:Iou:Iou","createArguments":{}}}';
  return shape === 'disclosed'
    ? `{"commands":{"commands":[${create}],"commandId":"b","actAs":["Alice"],"userId":"alice","disclosedContracts":[${units}]}}`
    : `{"commands":{"commands":[${units}],"commandId":"b","actAs":["Alice"],"userId":"alice"}}`;
}

const rule = REQUEST_RULES.get(OPERATION)!;
const pool = createLargeBodyPool(LARGE_BODY_POOL);

function inThread(bytes: Buffer): void {
  const body = parseJsonObject(decodeBody(bytes, undefined), { maxDepth: 512, exactNumbers: rule.exactNumbers });
  if (rule(body.value, { path: PATH, principal, numberText: body.numberText }) !== undefined)
    throw new Error('refused');
}

async function inWorker(bytes: Buffer): Promise<void> {
  const verdict = await pool.judge(
    { operation: OPERATION, charset: undefined, maxDepth: 512, path: PATH, principal },
    bytes,
  );
  if (verdict.violation !== undefined) throw verdict.violation;
}

/** Process CPU (all threads) and main-thread busy time, ms per body, over PER_ROUND bodies. */
async function measure(text: string, variant: 'in thread' | 'worker'): Promise<{ cpu: number; main: number }> {
  const bodies = Array.from({ length: PER_ROUND }, () => Buffer.from(text)); // each lent once
  const cpu = process.cpuUsage();
  const elu = performance.eventLoopUtilization();
  for (const bytes of bodies) {
    if (variant === 'in thread') inThread(bytes);
    else await inWorker(bytes);
  }
  const used = process.cpuUsage(cpu);
  const busy = performance.eventLoopUtilization(elu);
  return { cpu: (used.user + used.system) / 1000 / PER_ROUND, main: busy.active / PER_ROUND };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

for (const shape of ['disclosed', 'commands'] as const) {
  const text = submission(shape);
  await measure(text, 'worker'); // warm-up: the worker starts, both paths JIT
  await measure(text, 'in thread');
  const rows = {
    'in thread': [] as Array<{ cpu: number; main: number }>,
    worker: [] as Array<{ cpu: number; main: number }>,
  };
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? (['in thread', 'worker'] as const) : (['worker', 'in thread'] as const);
    for (const variant of order) rows[variant].push(await measure(text, variant));
  }
  const ratio = (key: 'cpu' | 'main') => median(rows.worker.map((w, i) => w[key] / rows['in thread'][i]![key]));
  console.table(
    Object.entries(rows).map(([variant, runs]) => ({
      variant,
      'process CPU ms/body (median)': median(runs.map((r) => r.cpu)).toFixed(1),
      'main thread busy ms/body (median)': median(runs.map((r) => r.main)).toFixed(1),
    })),
  );
  console.log(
    `${shape}, ${(Buffer.byteLength(text) / 1048576).toFixed(2)} MiB: worker / in thread (paired median of ${ROUNDS} rounds): ` +
      `process CPU ${ratio('cpu').toFixed(2)}x, main thread ${ratio('main').toFixed(3)}x; node ${process.version}`,
  );
}
await pool.close();
