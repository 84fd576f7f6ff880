// Prepared transactions decoded with Canton's protobuf definitions (@canton-network/core-ledger-proto):
// what the transaction will do becomes the document's commands and actAs; every one is decoded in the
// worker pool, the only thread that loads the bindings; bad input is a PreparedTransactionError (a
// coded refusal), never a crash; every wait is bounded.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { DamlTransaction_Node, PreparedTransaction, Value } from '@canton-network/core-ledger-proto';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createPreparedDecoder,
  PREPARED_WORKER_HEAP_MB,
  PreparedDecoderBusy,
  type PreparedDecoder,
} from '../../src/ledger-policy/prepared-pool.js';
import {
  DEFAULT_PREPARED_LIMITS,
  preparedTransactionBytes,
  PreparedTransactionError,
} from '../../src/ledger-policy/prepared-summary.js';
import { summarizePreparedTransaction } from '../../src/ledger-policy/prepared-transaction.js';
import { createLedgerPolicy } from '../../src/ledger-policy/ledger-policy.js';
import type { Submission } from '../../src/sandbox/commands.js';
import { ALICE, BOB, document, IOU_BY_ID, preparedBySandbox, principal, section } from './support.js';
import { SANDBOX_SEED } from '../../src/sandbox/app.js';
import { ROOT } from '../helpers/process.js';

const prepared = preparedBySandbox;

const transfer = (newOwner: string): Submission['commands'] => [
  {
    kind: 'exercise',
    templateId: IOU_BY_ID,
    contractId: SANDBOX_SEED.initialTransaction.contractId,
    choice: 'Transfer',
    choiceArgument: { newOwner },
  },
];

/** A create whose argument makes the base64 transaction about `bytes` long. */
const sized = (bytes: number): Submission['commands'] => [
  {
    kind: 'create',
    templateId: IOU_BY_ID,
    createArguments: {
      owner: ALICE,
      notes: Array.from({ length: Math.ceil(bytes / 80) }, (_, i) => `note ${i} `.padEnd(56, 'x')),
    },
  },
];

/**
 * Run by a node process of its own: records every module its main thread resolves (module.registerHooks
 * is per thread), imports the gateway (app.js), the ledger policy, the pool and the sandbox, decodes the
 * transaction on stdin through the pool, and prints the bindings' modules the main thread loaded, then
 * whether importing the decoder itself loads them (so that the check can see them).
 */
const MAIN_THREAD_PROBE = `
import { registerHooks } from 'node:module';
import { readFileSync } from 'node:fs';
const resolved = new Set();
registerHooks({ resolve(specifier, context, next) { const found = next(specifier, context); resolved.add(found.url); return found; } });
const bindings = () => [...resolved].filter((url) => /@canton-network\\/core-ledger-proto|@protobuf-ts/.test(url));
const dist = new URL('dist/', 'file://' + process.cwd() + '/');
await import(new URL('app.js', dist));
await import(new URL('sandbox/app.js', dist));
await import(new URL('ledger-policy/ledger-policy.js', dist));
const { createPreparedDecoder } = await import(new URL('ledger-policy/prepared-pool.js', dist));
const limits = { maxValueDepth: 256, maxRoots: 10000, withArguments: true };
const decoder = createPreparedDecoder({ workerThreads: 1, maxQueue: 1, timeoutMs: 40000, heapMb: 64, limits });
const summary = await decoder.decode(readFileSync(0, 'utf8'));
await decoder.close();
const onEventLoop = bindings();
await import(new URL('ledger-policy/prepared-transaction.js', dist));
console.log(JSON.stringify({ actAs: summary.actAs, onEventLoop, decoderLoadsThem: bindings().length > 0 }));
`;

describe('a prepared transaction', () => {
  it("reads its root nodes' templates, choices and arguments and its act-as parties", async () => {
    const summary = summarizePreparedTransaction(preparedTransactionBytes(await prepared(transfer(BOB))));
    expect(summary.actAs).toEqual([ALICE]);
    expect(summary.commands).toEqual([
      expect.objectContaining({
        kind: 'ExerciseCommand',
        choice: 'Transfer',
        choiceArgument: { newOwner: BOB },
        template: expect.objectContaining({ packageName: 'sandbox-iou', moduleName: 'Iou', entityName: 'Iou' }),
      }),
    ]);
    expect(summary.unreadable).toBe(0);
  });

  it('is held to the same rules at execute as its commands at submit', async () => {
    const policy = createLedgerPolicy(
      section([
        {
          name: 'p',
          principals: { subjects: ['alice'] },
          rules: [
            { name: 'no-transfer', effect: 'deny', choices: ['Transfer'] },
            { name: 'rest', operations: ['writes'] },
          ],
        },
      ]),
    );
    const summary = summarizePreparedTransaction(preparedTransactionBytes(await prepared(transfer(BOB))));
    const execute = document(
      'postV2Interactive-submissionExecuteandwait',
      { preparedTransaction: '…', userId: 'alice' },
      principal('alice'),
      { prepared: summary },
    );
    expect(policy.decide(execute)).toMatchObject({ effect: 'deny', rule: 'no-transfer' });
    const create = summarizePreparedTransaction(preparedTransactionBytes(await prepared(sized(100))));
    expect(
      policy.decide(document('postV2Interactive-submissionExecute', {}, principal('alice'), { prepared: create })),
    ).toMatchObject({ effect: 'allow' });
  });

  it('refuses what is not one with a PreparedTransactionError: not base64, not the message, no roots, too deep', async () => {
    expect(() => preparedTransactionBytes('%%%')).toThrow(PreparedTransactionError);
    expect(() => preparedTransactionBytes(42)).toThrow(PreparedTransactionError);
    expect(() => summarizePreparedTransaction(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0x0f]))).toThrow(
      PreparedTransactionError,
    );
    expect(() => summarizePreparedTransaction(new Uint8Array())).toThrow(/without roots/);
    let deep: unknown = 'leaf';
    for (let i = 0; i < 40; i++) deep = { inner: deep };
    const bytes = preparedTransactionBytes(
      await prepared([{ kind: 'create', templateId: IOU_BY_ID, createArguments: deep as never }]),
    );
    expect(() => summarizePreparedTransaction(bytes, { ...DEFAULT_PREPARED_LIMITS, maxValueDepth: 30 })).toThrow(
      /deeper than 30/,
    );
    expect(summarizePreparedTransaction(bytes).commands).toHaveLength(1);
  });
});

type Reflected = { readonly fields: readonly { readonly localName: string; readonly no: number }[] };
/** A field's number, from the bindings' reflection (no number written here by hand). */
const fieldNumber = (type: Reflected, name: string) => type.fields.find((field) => field.localName === name)!.no;

/**
 * A PreparedTransaction whose create's argument is an optional in an optional... `depth` times, written
 * by hand (the bindings' writer would recurse as deep as their reader): deeper than any stack.
 */
function nestedOptionals(depth: number): Uint8Array {
  const node = DamlTransaction_Node.fields.find((field) => field.localName === 'v1')!;
  const nodeType = (node as unknown as { T: () => Reflected }).T();
  const create = (
    nodeType.fields.find((field) => field.localName === 'create') as unknown as { T: () => Reflected }
  ).T();
  const optional = fieldNumber(Value, 'optional');
  const numbers = [
    fieldNumber(PreparedTransaction, 'transaction'),
    fieldNumber((PreparedTransaction.fields[0] as unknown as { T: () => Reflected }).T(), 'nodes'),
    fieldNumber(DamlTransaction_Node, 'v1'),
    fieldNumber(nodeType, 'create'),
    fieldNumber(create, 'argument'),
    ...Array.from({ length: depth }, () => [optional, 1]).flat(), // Optional.value is field 1
  ];
  const varint = (n: number) => {
    const out: number[] = [];
    for (; n > 0x7f; n >>>= 7) out.push((n & 0x7f) | 0x80);
    return [...out, n];
  };
  // Each level's length, innermost (empty) first.
  const lengths = new Array<number>(numbers.length + 1).fill(0);
  for (let i = numbers.length - 1; i >= 0; i--)
    lengths[i] = varint((numbers[i]! << 3) | 2).length + varint(lengths[i + 1]!).length + lengths[i + 1]!;
  const bytes = new Uint8Array(lengths[0]!);
  let at = 0;
  numbers.forEach((no, i) => {
    for (const byte of [...varint((no << 3) | 2), ...varint(lengths[i + 1]!)]) bytes[at++] = byte;
  });
  return bytes;
}

describe('a hostile prepared transaction', () => {
  it('nested deeper than the stack is a PreparedTransactionError (protobuf-ts reads without a recursion limit)', () => {
    const bytes = nestedOptionals(100_000);
    expect(bytes.length).toBeGreaterThan(200_000);
    for (const withArguments of [true, false])
      expect(() => summarizePreparedTransaction(bytes, { ...DEFAULT_PREPARED_LIMITS, withArguments })).toThrow(
        PreparedTransactionError,
      );
  });
});

describe('the decoder pool', () => {
  let decoder: PreparedDecoder | undefined;
  afterEach(async () => {
    await decoder?.close();
    decoder = undefined;
  });

  // The worker starts and loads the bindings at the first decode: seconds on a loaded machine.
  it(
    "decodes small and 1 MiB ones in its worker thread, with the decoder's result; bad ones as refusals",
    { timeout: 60_000 },
    async () => {
      decoder = createPreparedDecoder({
        workerThreads: 1,
        maxQueue: 4,
        timeoutMs: 30_000,
        heapMb: PREPARED_WORKER_HEAP_MB,
        limits: DEFAULT_PREPARED_LIMITS,
      });
      const small = await prepared(transfer(BOB));
      expect(await decoder.decode(small)).toEqual(summarizePreparedTransaction(preparedTransactionBytes(small)));
      const large = await prepared(sized(1024 * 1024));
      expect(large.length).toBeGreaterThan(1024 * 1024);
      expect(await decoder.decode(large)).toEqual(summarizePreparedTransaction(preparedTransactionBytes(large)));
      await expect(decoder.decode('A'.repeat(70_000))).rejects.toBeInstanceOf(PreparedTransactionError);
      await expect(decoder.decode(42)).rejects.toBeInstanceOf(PreparedTransactionError);
      const hostile = Buffer.from(nestedOptionals(100_000)).toString('base64');
      await expect(decoder.decode(hostile)).rejects.toBeInstanceOf(PreparedTransactionError);
      expect((await decoder.decode(small)).actAs).toEqual([ALICE]); // the worker lives on
    },
  );

  // A process of its own (the built files), so that nothing else has loaded the bindings on its main thread.
  it(
    'loads the protobuf bindings in its worker thread only, never on the event loop',
    { timeout: 60_000 },
    async () => {
      const output = execFileSync(
        join(ROOT, 'node_modules/.bin/node'),
        ['--input-type=module', '--eval', MAIN_THREAD_PROBE],
        { cwd: ROOT, input: await prepared(transfer(BOB)), encoding: 'utf8', timeout: 50_000 },
      );
      expect(JSON.parse(output)).toEqual({ actAs: [ALICE], onEventLoop: [], decoderLoadsThem: true });
    },
  );

  it('refuses what would wait past its queue or its time, and goes on serving', { timeout: 60_000 }, async () => {
    const large = await prepared(sized(1024 * 1024));
    decoder = createPreparedDecoder({
      workerThreads: 1,
      maxQueue: 1,
      timeoutMs: 30_000,
      heapMb: PREPARED_WORKER_HEAP_MB,
      limits: DEFAULT_PREPARED_LIMITS,
    });
    const results = await Promise.allSettled(Array.from({ length: 6 }, async () => decoder!.decode(large)));
    const refused = results.filter((r) => r.status === 'rejected');
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(PreparedDecoderBusy);
    expect(results.some((r) => r.status === 'fulfilled')).toBe(true);
    await decoder.close();
    decoder = createPreparedDecoder({
      workerThreads: 1,
      maxQueue: 4,
      timeoutMs: 1,
      heapMb: PREPARED_WORKER_HEAP_MB,
      limits: DEFAULT_PREPARED_LIMITS,
    });
    await expect(decoder.decode(large)).rejects.toBeInstanceOf(PreparedDecoderBusy);
  });
});
