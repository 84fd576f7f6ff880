// Micro-benchmark (not a test): the CPU to decide an execute call's prepared transaction of about
// 100 KB and 1 MiB (base64 decode, protobuf decode with Canton's messages from
// @canton-network/core-ledger-proto, the root nodes' arguments to JSON, the decision document, the
// decision), and what it does to other callers: the main thread's busy time per decision (event-loop
// utilization) and its longest stall, decoded on the event loop (for comparison: the gateway never
// does) and through the worker pool, with the arguments read (a rule reads them) and without; and the
// first decode of a new pool (the worker starts and loads the bindings).
// Run: npm run bench:prepared (builds dist/ first: the pool's worker is the built one).
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Value } from '@sinclair/typebox/value';
import { decisionDocument, principalFacts } from '../src/ledger-policy/build-document.js';
import { createLedgerPolicy } from '../src/ledger-policy/ledger-policy.js';
import { createPreparedDecoder, PREPARED_WORKER_HEAP_MB } from '../src/ledger-policy/prepared-pool.js';
import {
  DEFAULT_PREPARED_LIMITS,
  preparedTransactionBytes,
  type PreparedSummary,
} from '../src/ledger-policy/prepared-summary.js';
import { summarizePreparedTransaction } from '../src/ledger-policy/prepared-transaction.js';
import { LedgerPolicySchema, type LedgerPolicyConfig } from '../src/config/schema.js';
import { createSandboxState } from '../src/sandbox/state.js';
import { commitSeedTransaction, type Submission } from '../src/sandbox/commands.js';
import { prepareTransaction } from '../src/sandbox/interactive.js';
import { SANDBOX_SEED } from '../src/sandbox/app.js';

const ALICE = SANDBOX_SEED.parties.alice;
const REPETITIONS = 20;

/** A prepared transaction of about `bytes` (base64): one create whose argument is a list of records. */
async function prepared(bytes: number): Promise<string> {
  const state = createSandboxState();
  commitSeedTransaction(state);
  const rows = Array.from({ length: Math.ceil(bytes / 167) }, (_, i) => ({ line: i, owner: ALICE, memo: `row ${i}` }));
  const submission: Submission = {
    userId: 'alice',
    commandId: 'bench',
    workflowId: '',
    actAs: [ALICE],
    readAs: [],
    synchronizerId: '',
    commands: [{ kind: 'create', templateId: SANDBOX_SEED.templates.iou, createArguments: { owner: ALICE, rows } }],
  };
  return Buffer.from(await prepareTransaction(state, submission)).toString('base64');
}

const policy = createLedgerPolicy(
  Value.Default(LedgerPolicySchema, {
    policies: [
      {
        name: 'wallet',
        principals: { subjects: ['alice'] },
        rules: [{ name: 'own', actAs: ['$claims.party'], templates: ['#sandbox-iou:*'] }],
      },
    ],
  }) as LedgerPolicyConfig,
);
const caller = principalFacts(
  { subject: 'alice', issuer: 'https://idp', claims: { party: ALICE } },
  { clientAddress: '' },
);
function decide(summary: PreparedSummary): void {
  const document = decisionDocument({
    operation: 'postV2Interactive-submissionExecute',
    writes: true,
    principal: caller,
    body: {},
    prepared: summary,
  });
  const decision = policy.decide(document);
  if (decision instanceof Promise || decision.effect !== 'allow')
    throw new Error(`expected allow, got ${JSON.stringify(decision)}`);
}

function cpuMs(run: () => void, times: number): number {
  const before = process.cpuUsage();
  for (let i = 0; i < times; i++) run();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000 / times;
}

/** The event loop's busy milliseconds per decision and its longest delay while `work` decides `times` transactions. */
async function mainThread(work: () => Promise<void>, times: number): Promise<{ busyMs: number; stallMs: number }> {
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  histogram.enable();
  const ticker = setInterval(() => undefined, 1); // stands for other callers
  const before = performance.eventLoopUtilization();
  await work();
  const used = performance.eventLoopUtilization(before);
  clearInterval(ticker);
  histogram.disable();
  return { busyMs: used.active / times, stallMs: histogram.max / 1e6 };
}

const rows: Record<string, string | number>[] = [];
for (const size of [100 * 1024, 1024 * 1024]) {
  const encoded = await prepared(size);
  for (const withArguments of [true, false]) {
    const limits = { ...DEFAULT_PREPARED_LIMITS, withArguments };
    const once = () => decide(summarizePreparedTransaction(preparedTransactionBytes(encoded), limits));
    for (let i = 0; i < 3; i++) once(); // warm-up
    const cpu = cpuMs(once, REPETITIONS);
    const inline = await mainThread(async () => {
      for (let i = 0; i < REPETITIONS; i++) {
        once();
        await new Promise((resolve) => setImmediate(resolve));
      }
    }, REPETITIONS);
    const decoder = createPreparedDecoder({
      workerThreads: 1,
      maxQueue: REPETITIONS,
      timeoutMs: 60_000,
      heapMb: PREPARED_WORKER_HEAP_MB,
      limits,
    });
    const started = performance.now();
    await decoder.decode(encoded); // the worker starts and loads the bindings
    const firstMs = performance.now() - started;
    const pooled = await mainThread(async () => {
      for (let i = 0; i < REPETITIONS; i++) decide(await decoder.decode(encoded));
    }, REPETITIONS);
    await decoder.close();
    rows.push({
      'base64 bytes': encoded.length,
      arguments: withArguments ? 'read' : 'not read',
      'CPU ms/decision': cpu.toFixed(2),
      'event loop: main thread ms/decision': inline.busyMs.toFixed(2),
      'event loop: longest stall ms': inline.stallMs.toFixed(1),
      'pool: main thread ms/decision': pooled.busyMs.toFixed(2),
      'pool: longest stall ms': pooled.stallMs.toFixed(1),
      'pool: first decode ms': firstMs.toFixed(0),
    });
  }
}
console.table(rows);
console.log(`${REPETITIONS} decisions per size, node ${process.version}, ${new Date().toISOString()}`);
