// L1 of issue 42: submissions at the participant's own limit (limits.bodyBytes, 8 MiB), 16 at once from
// 16 token holders, on a route read only for its userId (the body is tokenized as it arrives and held
// until judged, then forwarded), against the shipped process. 16 x 8 MiB is four times the default body
// budget (limits.bufferedBodyBytes, 32 MiB): what does not fit is refused at once with the budget's
// coded 503 and Retry-After: 1, never left waiting, and a client that retries as told gets through.
// The refusal comes while the client still sends: closed at once, the connection was reset under
// the client, which lost the answer (2 of 28 attempts; src/exchange/lingering-close.ts). Every body
// answered 200 reached the participant byte for byte, no refused one reached it, another caller is
// answered throughout, and the process stays inside the pod's limit. Its latency (p99 before, during,
// after) and the event loop's delay are printed for every run, and asserted for the rule-checked
// route (L2, issue 42's bars). The bodies carry disclosed contracts (3 KB blobs), as large
// submissions do.
import { beforeAll, describe, expect, it } from 'vitest';
import { buildDist } from '../helpers/process.js';
import { createTestIssuer, TEST_PARTICIPANT } from '../helpers/tokens.js';
import {
  hashingUpstream,
  metricValue,
  residentMemory,
  runDriver,
  shipped,
  sleep,
  startShippedGateway,
  steadyCaller,
} from './shipped-gateway.js';

const MiB = 1024 * 1024;
const CALLERS = 16;
const LOOP_LAG_P99 = 'nodejs_eventloop_lag_p99_seconds';
const SUBMIT = '/v2/commands/submit-and-wait';
/** A rule-checked route: its bodies are read whole and, past 1 MiB, judged in a worker thread. */
const SUBMIT_FOR_TRANSACTION = '/v2/commands/submit-and-wait-for-transaction';

interface Sent {
  readonly sha256: string;
  readonly accepted: boolean;
  readonly attempts: number;
}

interface L1Result {
  readonly answers: Record<string, number>;
  readonly refusals: Record<string, number>;
  readonly sent: Sent[];
  readonly longestMs: number;
}

/**
 * 16 holders' 8 MiB submissions of `shape` (drivers/large-submissions.mjs) through the shipped process
 * with `extra` config; what each side saw.
 */
async function sixteenAtTheLimit(extra: string[], shape: 'disclosed' | 'string' = 'disclosed', path = SUBMIT) {
  const upstream = await hashingUpstream();
  const issuer = await createTestIssuer();
  const gateway = await startShippedGateway(upstream.url, issuer.issuerConfig, TEST_PARTICIPANT, { extra });
  try {
    const caller = steadyCaller(gateway.api, await issuer.mint({ sub: 'carol' }), 2);
    const tokens = await Promise.all(Array.from({ length: CALLERS }, (_, i) => issuer.mint({ sub: `l1-${i}` })));
    await sleep(1_000);
    const beforeFrom = Date.now();
    await sleep(3_000);
    const before = caller.window(beforeFrom, Date.now());
    await metricValue(gateway.admin, LOOP_LAG_P99); // the event loop's delay, from here on (read, then reset)
    const drivenFrom = Date.now();
    const driver = runDriver('L1', { api: gateway.api, tokens, shape, path, durationMs: 60_000 });
    const result = (await driver.finished) as L1Result;
    const driven = caller.window(drivenFrom, Date.now());
    const loopLagP99Ms = (await metricValue(gateway.admin, LOOP_LAG_P99)) * 1000;
    const afterFrom = Date.now();
    await sleep(3_000);
    const after = caller.window(afterFrom, Date.now());
    await caller.stop();
    const alive = gateway.alive();
    return {
      result,
      before,
      driven,
      after,
      loopLagP99Ms,
      received: upstream.received,
      alive,
      memory: residentMemory(gateway.pid),
    };
  } finally {
    await gateway.close();
    await upstream.close();
  }
}

function reportOf(run: Awaited<ReturnType<typeof sixteenAtTheLimit>>): string {
  const { result, before, driven, after, loopLagP99Ms, memory } = run;
  const attempts = result.sent.map((entry) => entry.attempts);
  return (
    `answers ${JSON.stringify(result.answers)}, refusals ${JSON.stringify(result.refusals)}, attempts per ` +
    `caller ${Math.min(...attempts)}-${Math.max(...attempts)}, longest attempt ${result.longestMs} ms; another ` +
    `caller's p99 ${before.p99Ms} ms before, ${driven.p99Ms} ms during (${JSON.stringify(driven.statuses)}), ` +
    `${after.p99Ms} ms after; event loop delay p99 ${loopLagP99Ms.toFixed(0)} ms during; ` +
    `resident peak ${(memory.peak / MiB).toFixed(0)} MiB of ${(shipped().memoryLimitBytes / MiB).toFixed(0)} ` +
    `(the rule's margin ${(shipped().memoryLimitBytes / 1.25 / MiB).toFixed(0)})`
  );
}

/** What holds whatever the budget: every 200 reached the participant unchanged, nothing else did. */
function expectDeliveredUnchanged(
  run: Awaited<ReturnType<typeof sixteenAtTheLimit>>,
  report: string,
  path = SUBMIT,
  residentBound = shipped().memoryLimitBytes * 0.75,
): void {
  const { result, received } = run;
  expect(result.sent, report).toHaveLength(CALLERS);
  expect(
    result.sent.every((entry) => entry.accepted),
    report,
  ).toBe(true);
  expect(received.map(({ sha256 }) => sha256).sort(), report).toEqual(result.sent.map(({ sha256 }) => sha256).sort());
  expect(
    received.every(({ url, bytes }) => url === path && bytes === 8 * MiB),
    report,
  ).toBe(true);
  expect(run.alive, report).toBe(true);
  expect(Object.keys(run.driven.statuses), report).toEqual(['200']);
  expect(run.memory.peak, report).toBeLessThan(residentBound);
}

describe('L1, 16 submissions at the participant limit at once, against the shipped process', () => {
  beforeAll(() => buildDist(), 120_000);

  it('under the default budget: what does not fit is refused at once with 503 and Retry-After: 1; retried, every body arrives unchanged', async () => {
    const run = await sixteenAtTheLimit([]);
    const report = reportOf(run);
    console.info(`L1, default budget: ${report}`);
    expectDeliveredUnchanged(run, report);
    // The budget holds four at a time: the others were refused, with the budget's code, told when to retry.
    expect(run.result.answers['503'] ?? 0, report).toBeGreaterThan(0);
    expect(Object.keys(run.result.answers).sort(), report).toEqual(['200', '503']);
    expect(Object.keys(run.result.refusals), report).toEqual(['503 GATEWAY_BODY_BUFFER_EXHAUSTED Retry-After: 1']);
  }, 150_000);

  // The tokenizer builds each string whole before it is cut: bodies of one 8 MiB string held 259 MiB
  // while only their bytes were counted; what long strings hold now counts against the budget too.
  it('bodies of one 8 MiB string each: what their strings hold counts against the budget; every body arrives, inside the bound', async () => {
    const run = await sixteenAtTheLimit([], 'string');
    const report = reportOf(run);
    console.info(`L1, one 8 MiB string each: ${report}`);
    expectDeliveredUnchanged(run, report);
    expect(Object.keys(run.result.refusals), report).toEqual(['503 GATEWAY_BODY_BUFFER_EXHAUSTED Retry-After: 1']);
  }, 150_000);

  // The rule-checked routes' bodies, up to the participant's limit, are judged in a worker thread
  // (src/policy/large-body-pool.ts): the event loop is not held by them (its delay's p99 stays under
  // 500 ms, where one 8 MiB parse on the loop held it 4 to 7 s), and what the worker holds counts
  // against the body budget beside the bytes. Issue 42's two bars: another caller's p99 within its p99
  // before + 50 ms, and the resident peak under the margin of docs/operations.md's memory rule (the
  // pod's limit 25% over this peak, the highest the gateway admits). This file runs alone, after the
  // rest of the suite (vitest.config.ts): the figures are the gateway's, not those of other test files
  // sharing the two cores. Run once more when it misses: this VM runs at half its speed for minutes at
  // a time, and a CI run that met such a stretch measured +69 ms (5,109 calls in its minute, against
  // 7,107 to 10,960 in the runs around it). Each run's figures are printed, a missed one included.
  it(
    'L2, rule-checked bodies (submit-and-wait-for-transaction) of 8 MiB: the event loop is not held; every body arrives, inside the pod',
    async () => {
      const run = await sixteenAtTheLimit([], 'disclosed', SUBMIT_FOR_TRANSACTION);
      const report = reportOf(run);
      console.info(`L2, rule-checked: ${report}`);
      expectDeliveredUnchanged(run, report, SUBMIT_FOR_TRANSACTION, shipped().memoryLimitBytes);
      expect(Object.keys(run.result.refusals), report).toEqual(['503 GATEWAY_BODY_BUFFER_EXHAUSTED Retry-After: 1']);
      expect(run.loopLagP99Ms, report).toBeLessThan(500);
      expect(run.driven.p99Ms, report).toBeLessThanOrEqual(run.before.p99Ms + 50);
      expect(run.memory.peak * 1.25, report).toBeLessThanOrEqual(shipped().memoryLimitBytes);
    },
    { timeout: 150_000, retry: 1 },
  );
});
