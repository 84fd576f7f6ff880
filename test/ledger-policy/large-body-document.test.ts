// A governed caller's large body made into its decision document in the prepared-transaction pool's
// worker (src/ledger-policy/large-body-document.ts): the same document as the event loop builds from
// the same body, field by field, for every kind of call; the same refusals; the tree counted before
// it is built; what the worker holds counted against the body budget; a full or late pool refused.
import { afterEach, describe, expect, it } from 'vitest';
import { BodyBudget } from '../../src/body/budget.js';
import { decisionDocument, plainDocument, type CallInput } from '../../src/ledger-policy/build-document.js';
import { SLICE_ITEMS } from '../../src/ledger-policy/body-document-worker.js';
import { documentOffThread, type LargeBodyCall } from '../../src/ledger-policy/large-body-document.js';
import {
  createPreparedDecoder,
  PREPARED_WORKER_HEAP_MB,
  type PreparedDecoder,
} from '../../src/ledger-policy/prepared-pool.js';
import { summarizePreparedTransaction } from '../../src/ledger-policy/prepared-transaction.js';
import { preparedTransactionBytes } from '../../src/ledger-policy/prepared-summary.js';
import { GatewayError } from '../../src/errors.js';
import { LARGE_BODY_POOL } from '../../src/policy/large-body-pool.js';
import { SANDBOX_SEED } from '../../src/sandbox/app.js';
import { ALICE, BOB, IOU_BY_ID, OPERATOR, preparedBySandbox, principal, TRANSFER } from './support.js';

const MiB = 1024 * 1024;
const READING = { inThreadBytes: MiB, treeBounds: LARGE_BODY_POOL.treeBounds };
const LIMITS = { maxValueDepth: 256, maxRoots: 10_000, withArguments: true };

let decoder: PreparedDecoder | undefined;
afterEach(async () => {
  await decoder?.close();
  decoder = undefined;
});
const pool = (options: Partial<Parameters<typeof createPreparedDecoder>[0]> = {}) =>
  (decoder = createPreparedDecoder({
    workerThreads: 1,
    maxQueue: 8,
    timeoutMs: 20_000,
    heapMb: PREPARED_WORKER_HEAP_MB,
    limits: LIMITS,
    ...options,
  }));

const CALLER = principal('alice', { groups: ['traders'] });
const input = (operation: string, writes = true): Omit<CallInput, 'body' | 'prepared'> => ({
  operation,
  writes,
  principal: CALLER,
  pathParameters: {},
});

/** `body` with a `pad` field that takes it past `size` bytes (the pad is read by no rule). */
const padded = (body: object, size = 2 * MiB) => JSON.stringify({ ...body, pad: 'p'.repeat(size) });

function call(operation: string, text: string, extra: Partial<LargeBodyCall> = {}): LargeBodyCall & { back: Buffer[] } {
  const back: Buffer[] = [];
  return {
    input: input(operation),
    bytes: Buffer.from(text),
    charset: undefined,
    maxDepth: 512,
    executes: operation.startsWith('postV2Interactive-submissionExecute'),
    withArguments: true,
    bytesBack: (bytes) => back.push(bytes),
    back,
    ...extra,
  };
}

/** The document the event loop builds from the same text (stage.ts's in-thread path), every part read. */
function inThread(operation: string, text: string, prepared?: string): ReturnType<typeof decisionDocument> {
  const summary =
    prepared === undefined ? undefined : summarizePreparedTransaction(preparedTransactionBytes(prepared), LIMITS);
  return plainDocument(
    decisionDocument({
      ...input(operation),
      body: JSON.parse(text),
      ...(summary === undefined ? {} : { prepared: summary }),
    }),
  );
}

const preparedTransfer = () =>
  preparedBySandbox([
    {
      kind: 'exercise',
      templateId: IOU_BY_ID,
      contractId: SANDBOX_SEED.initialTransaction.contractId,
      choice: 'Transfer',
      choiceArgument: { newOwner: BOB },
    },
  ]);

const hold = () => new BodyBudget({ bufferedBodyBytes: 64 * MiB, bufferedBodyShare: 1 }).hold('alice');

async function refusal(promise: Promise<unknown>): Promise<{ code: string; cause: string | undefined }> {
  const error = await promise.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(GatewayError);
  return { code: (error as GatewayError).definition.code, cause: (error as GatewayError).details.cause };
}

describe('a large body made into its decision document in a worker', () => {
  it('is the document the event loop builds from the same body, for every kind of call', async () => {
    const transfer = await preparedTransfer();
    const create = { CreateCommand: { templateId: IOU_BY_ID, createArguments: { owner: ALICE, n: [1, 2, 3] } } };
    const disclosed = { templateId: IOU_BY_ID, contractId: '00cd', createdEventBlob: 'AA==', synchronizerId: '' };
    const cases: Array<[operation: string, body: object, prepared?: string]> = [
      [
        'submitAndWaitForTransaction',
        { commands: { commands: [create, TRANSFER], actAs: [ALICE], readAs: [BOB], disclosedContracts: [disclosed] } },
      ],
      ['postV2CommandsSubmit-and-wait', { commands: [TRANSFER, { Bogus: {} }], actAs: [ALICE], userId: 'bob' }],
      [
        'postV2CommandsSubmit-and-wait-for-reassignment',
        {
          reassignmentCommands: {
            submitter: OPERATOR,
            userId: 'alice',
            commands: [{ command: { UnassignCommand: { value: { contractId: '00ab', source: 's1', target: 's2' } } } }],
          },
        },
      ],
      [
        'postV2UpdatesUpdate-by-offset',
        {
          offset: 5,
          updateFormat: {
            includeTransactions: {
              eventFormat: { filtersByParty: { [ALICE]: { cumulative: [] }, [BOB]: { cumulative: [] } } },
            },
          },
        },
      ],
      ['postV2Interactive-submissionExecuteandwait', { preparedTransaction: transfer, userId: 'alice' }, transfer],
      // Lists longer than a slice (SLICE_ITEMS) go back in slices, put together in order.
      [
        'postV2CommandsSubmit-and-wait',
        {
          commands: Array.from({ length: 2 * SLICE_ITEMS + 1 }, (_, i) => (i % 3 === 0 ? TRANSFER : create)),
          disclosedContracts: Array.from({ length: SLICE_ITEMS + 7 }, (_, i) => ({
            ...disclosed,
            contractId: `00${i}`,
          })),
          actAs: [ALICE],
        },
      ],
    ];
    const d = pool();
    for (const [operation, body, prepared] of cases) {
      const text = padded(body);
      const sent = call(operation, text);
      const document = await documentOffThread(d, READING, sent, hold());
      expect(document, operation).toEqual(inThread(operation, text, prepared));
      expect(
        sent.back.map((bytes) => bytes.toString()),
        operation,
      ).toEqual([text]);
    }
  });

  it("hands the commands' arguments back only when asked: the rest of the document is the same", async () => {
    const text = padded({
      commands: [TRANSFER, { CreateCommand: { templateId: IOU_BY_ID, createArguments: { owner: BOB } } }],
      actAs: [ALICE],
    });
    const document = await documentOffThread(
      pool(),
      READING,
      call('postV2CommandsSubmit-and-wait', text, { withArguments: false }),
      hold(),
    );
    const full = inThread('postV2CommandsSubmit-and-wait', text);
    const bare = { createArguments: null, choiceArgument: null, contractKey: null };
    expect(document).toEqual({ ...full, commands: full.commands.map((command) => ({ ...command, ...bare })) });
  });

  it('refuses what the event loop refuses, with the same codes, and gives the bytes back', async () => {
    const d = pool();
    const notJson = call('postV2CommandsSubmit-and-wait', `${padded({ actAs: [ALICE] })}x`);
    expect(await refusal(documentOffThread(d, READING, notJson, hold()))).toMatchObject({ code: 'DECODE_FAILURE' });
    expect(notJson.back).toHaveLength(1);
    const deep = call(
      'postV2CommandsSubmit-and-wait',
      padded({ x: JSON.parse(`${'['.repeat(600)}${']'.repeat(600)}`) }),
    );
    expect(await refusal(documentOffThread(d, READING, deep, hold()))).toMatchObject({
      code: 'GATEWAY_MALFORMED_REQUEST',
    });
    expect(deep.back).toHaveLength(1);
    const unreadable = call(
      'postV2Interactive-submissionExecute',
      padded({ preparedTransaction: Buffer.from('not one').toString('base64') }),
    );
    expect(await refusal(documentOffThread(d, READING, unreadable, hold()))).toMatchObject({
      code: 'GATEWAY_PREPARED_TRANSACTION_UNREADABLE',
    });
  });

  it('counts the tree before it is built: past the bounds a 413, as the request rules refuse it', async () => {
    const objects = `{"commands":[],"x":[${Array(700_000).fill('{}').join(',')}]}`;
    const refused = await refusal(
      documentOffThread(pool(), READING, call('postV2CommandsSubmit-and-wait', objects), hold()),
    );
    expect(refused.code).toBe('GATEWAY_REQUEST_TOO_LARGE');
    expect(refused.cause).toMatch(/^The request body would parse to more than 600000 objects and arrays/);
  });

  // The worker's heap is bounded, as the request rules' worker's is (policy/large-body-pool.ts): the
  // worst tree the bounds admit is read within the shipped heap, and a document past a heap is a 413
  // that kills only its worker, never the process.
  it('reads the worst tree the bounds admit within the shipped heap; past a heap a 413, and the next body is served', async () => {
    const worst = `{"commands":[],"x":[${Array(599_000).fill('{}').join(',')}]}`;
    const shipped = pool();
    const document = await documentOffThread(shipped, READING, call('postV2CommandsSubmit-and-wait', worst), hold());
    expect(document.operation).toBe('postV2CommandsSubmit-and-wait');
    const small = pool({ heapMb: 16 });
    const refused = await refusal(
      documentOffThread(small, READING, call('postV2CommandsSubmit-and-wait', worst), hold()),
    );
    expect(refused).toEqual({
      code: 'GATEWAY_REQUEST_TOO_LARGE',
      cause: `The request body (${worst.length} bytes) needs more memory to read than a ledger policy worker has (16 MiB).`,
    });
    const text = padded({ commands: [TRANSFER], actAs: [ALICE] }, 2 * MiB);
    const next = await documentOffThread(small, READING, call('postV2CommandsSubmit-and-wait', text), hold());
    expect(next).toEqual(inThread('postV2CommandsSubmit-and-wait', text));
  });

  it('counts what the worker holds against the body budget while it works, and gives it back', async () => {
    const budget = new BodyBudget({ bufferedBodyBytes: 64 * MiB, bufferedBodyShare: 1 });
    const text = padded({ commands: [TRANSFER], actAs: [ALICE] }, 4 * MiB);
    const working = documentOffThread(
      pool(),
      READING,
      call('postV2CommandsSubmit-and-wait', text),
      budget.hold('alice'),
    );
    expect(budget.heldBytes).toBe(2 * Buffer.byteLength(text));
    await working;
    expect(budget.heldBytes).toBe(0);
    const small = new BodyBudget({ bufferedBodyBytes: 6 * MiB, bufferedBodyShare: 1 });
    const over = call('postV2CommandsSubmit-and-wait', text);
    expect(await refusal(documentOffThread(pool(), READING, over, small.hold('alice')))).toMatchObject({
      code: 'GATEWAY_BODY_BUFFER_EXHAUSTED',
    });
    expect(over.back).toHaveLength(0); // never sent: the caller keeps its own bytes
    expect(small.heldBytes).toBe(0);
  });

  it('refuses as unavailable (503, retry) when the pool is full or late, never queueing without end', async () => {
    const text = padded({ commands: [TRANSFER], actAs: [ALICE] }, 4 * MiB);
    const d = pool({ maxQueue: 1 });
    const sends = Array.from({ length: 4 }, () =>
      documentOffThread(d, READING, call('postV2CommandsSubmit-and-wait', text), hold()).then(
        () => 'document',
        (error: GatewayError) => error.definition.code,
      ),
    );
    const answers = await Promise.all(sends);
    expect(answers.filter((answer) => answer === 'document')).toHaveLength(2);
    expect(answers.filter((answer) => answer === 'GATEWAY_LEDGER_POLICY_UNAVAILABLE')).toHaveLength(2);
    await d.close();
    const late = pool({ timeoutMs: 1 });
    const refused = await refusal(
      documentOffThread(late, READING, call('postV2CommandsSubmit-and-wait', text), hold()),
    );
    expect(refused.code).toBe('GATEWAY_LEDGER_POLICY_UNAVAILABLE');
  });
});
