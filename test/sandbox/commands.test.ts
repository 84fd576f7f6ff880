import { describe, expect, it } from 'vitest';
import { SANDBOX_SEED } from '../../src/sandbox/app.js';
import {
  expectCantonError,
  expectDecodeFailure,
  postJson,
  readJson,
  startSandbox,
  TRACEPARENT,
  unsignedJwt,
  withSandbox,
} from './helpers.js';

const ALICE = SANDBOX_SEED.parties.alice;
const BOB = SANDBOX_SEED.parties.bob;
const IOU = SANDBOX_SEED.templates.iou;
const SUBMIT = '/v2/commands/submit-and-wait-for-transaction';

const iouArguments = { issuer: ALICE, owner: BOB, currency: 'USD', amount: '10.0', observers: [] };
const createIou = { CreateCommand: { templateId: IOU, createArguments: iouArguments } };
const jsCommands = (commands: object[], extra: object = {}) => ({
  commands,
  commandId: `cmd-${Math.random()}`,
  actAs: [ALICE],
  userId: 'alice',
  ...extra,
});
const ledgerEffects = {
  eventFormat: { filtersByParty: { [ALICE]: { cumulative: [] } }, verbose: true },
  transactionShape: 'TRANSACTION_SHAPE_LEDGER_EFFECTS',
};

describe('sandbox command submission', () => {
  it('creates a contract and answers a JsTransaction with increasing offsets and the caller trace', async () => {
    await withSandbox(async ({ url }) => {
      const first = await postJson(
        `${url}${SUBMIT}`,
        { commands: jsCommands([createIou], { commandId: 'create-1' }) },
        { traceparent: TRACEPARENT },
      );
      expect(first.status).toBe(200);
      const { transaction } = await readJson(first);
      expect(transaction).toMatchObject({
        commandId: 'create-1',
        offset: 2,
        synchronizerId: SANDBOX_SEED.synchronizers.global.synchronizerId,
        traceContext: { traceparent: TRACEPARENT, tracestate: null },
      });
      expect(transaction.updateId).toMatch(/^1220[0-9a-f]{64}$/);
      expect(transaction.events).toHaveLength(1);
      expect(transaction.events[0].CreatedEvent).toMatchObject({
        offset: 2,
        nodeId: 0,
        templateId: IOU,
        createArgument: iouArguments,
        witnessParties: [ALICE],
        signatories: [ALICE],
        observers: [BOB],
        packageName: 'sandbox-iou',
        acsDelta: true,
        representativePackageId: SANDBOX_SEED.packages.iouV1.packageId,
      });

      const second = await readJson(await postJson(`${url}${SUBMIT}`, { commands: jsCommands([createIou]) }));
      expect(second.transaction.offset).toBe(3);
      expect(second.transaction.traceContext.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      expect(second.transaction.events[0].CreatedEvent.contractId).not.toBe(
        transaction.events[0].CreatedEvent.contractId,
      );
    });
  });

  it('archives on exercise: ArchivedEvent for ACS delta, consuming ExercisedEvent for ledger effects', async () => {
    await withSandbox(async ({ url }) => {
      const created = await readJson(await postJson(`${url}${SUBMIT}`, { commands: jsCommands([createIou]) }));
      const contractId = created.transaction.events[0].CreatedEvent.contractId;
      const exercise = { ExerciseCommand: { templateId: IOU, contractId, choice: 'Archive', choiceArgument: {} } };

      const acsDelta = await readJson(await postJson(`${url}${SUBMIT}`, { commands: jsCommands([exercise]) }));
      expect(acsDelta.transaction.events).toEqual([
        {
          ArchivedEvent: {
            offset: 3,
            nodeId: 0,
            contractId,
            templateId: IOU,
            witnessParties: [ALICE],
            packageName: 'sandbox-iou',
            implementedInterfaces: [],
          },
        },
      ]);

      const seeded = SANDBOX_SEED.initialTransaction.contractId;
      const transfer = {
        ExerciseCommand: { templateId: IOU, contractId: seeded, choice: 'Transfer', choiceArgument: { newOwner: BOB } },
      };
      const effects = await readJson(
        await postJson(`${url}${SUBMIT}`, { commands: jsCommands([transfer]), transactionFormat: ledgerEffects }),
      );
      expect(effects.transaction.events).toEqual([
        {
          ExercisedEvent: expect.objectContaining({
            offset: 4,
            nodeId: 0,
            contractId: seeded,
            choice: 'Transfer',
            choiceArgument: { newOwner: BOB },
            consuming: true,
            actingParties: [ALICE],
            witnessParties: [ALICE],
            lastDescendantNodeId: 0,
            acsDelta: true,
            packageName: 'sandbox-iou',
          }),
        },
      ]);
    });
  });

  it('answers CONTRACT_NOT_FOUND for an archived or unknown contract', async () => {
    await withSandbox(async ({ url }) => {
      const seeded = SANDBOX_SEED.initialTransaction.contractId;
      const archive = {
        ExerciseCommand: { templateId: IOU, contractId: seeded, choice: 'Archive', choiceArgument: {} },
      };
      expect((await postJson(`${url}${SUBMIT}`, { commands: jsCommands([archive]) })).status).toBe(200);
      for (const contractId of [seeded, `00${'ab'.repeat(32)}`]) {
        const command = { ExerciseCommand: { templateId: IOU, contractId, choice: 'Archive', choiceArgument: {} } };
        const body = await expectCantonError(await postJson(`${url}${SUBMIT}`, { commands: jsCommands([command]) }), {
          status: 404,
          code: 'CONTRACT_NOT_FOUND',
          category: 11,
        });
        expect(body['cause']).toBe(`Contract could not be found with id ${contractId}`);
        expect(body['resources']).toEqual([['ErrorResource(CID)', contractId]]);
        expect(body['context']['definite_answer']).toBe('false');
      }
      expect((await readJson(await fetch(`${url}/v2/state/ledger-end`))).offset).toBe(2);
    });
  });

  it('shows CreateAndExercise as a transient contract', async () => {
    await withSandbox(async ({ url }) => {
      const command = {
        CreateAndExerciseCommand: {
          templateId: IOU,
          createArguments: iouArguments,
          choice: 'Archive',
          choiceArgument: {},
        },
      };
      const acsDelta = await readJson(await postJson(`${url}${SUBMIT}`, { commands: jsCommands([command]) }));
      expect(acsDelta.transaction.events).toEqual([]);
      const effects = await readJson(
        await postJson(`${url}${SUBMIT}`, { commands: jsCommands([command]), transactionFormat: ledgerEffects }),
      );
      expect(effects.transaction.events.map((event: object) => Object.keys(event)[0])).toEqual([
        'CreatedEvent',
        'ExercisedEvent',
      ]);
      expect(effects.transaction.events[0].CreatedEvent.acsDelta).toBe(false);
      expect(effects.transaction.events[1].ExercisedEvent).toMatchObject({
        nodeId: 1,
        consuming: true,
        acsDelta: false,
      });
    });
  });

  it('answers submit-and-wait with the update id and completion offset', async () => {
    await withSandbox(async ({ url }) => {
      const response = await postJson(`${url}/v2/commands/submit-and-wait`, jsCommands([createIou]));
      expect(response.status).toBe(200);
      expect(await readJson(response)).toEqual({
        updateId: expect.stringMatching(/^1220[0-9a-f]{64}$/),
        completionOffset: 2,
      });
    });
  });

  it('fails strict JsCommands decoding with 400 text/plain', async () => {
    await withSandbox(async ({ url }) => {
      const complete = jsCommands([createIou]);
      for (const field of ['commands', 'commandId', 'actAs'] as const) {
        const { [field]: _omitted, ...partial } = complete;
        const text = await expectDecodeFailure(await postJson(`${url}${SUBMIT}`, { commands: partial }));
        expect(text).toBe(`Invalid value for: body (Missing required field at 'commands.${field}')`);
        const direct = await expectDecodeFailure(await postJson(`${url}/v2/commands/submit-and-wait`, partial));
        expect(direct).toBe(`Invalid value for: body (Missing required field at '${field}')`);
      }
      await expectDecodeFailure(await postJson(`${url}${SUBMIT}`, {}));
      const badTemplate = jsCommands([
        { CreateCommand: { templateId: 'not-a-valid-template-id', createArguments: {} } },
      ]);
      expect(await expectDecodeFailure(await postJson(`${url}${SUBMIT}`, { commands: badTemplate }))).toBe(
        "Invalid value for: body (Invalid identifier format (not-a-valid-template-id) not matching the expected format (<package>:<moduleName>:<entityName>) at 'commands.commands[0].CreateCommand.templateId')",
      );
    });
  });

  it('validates like Canton: MISSING_FIELD for empty command id, commands, act as and user id', async () => {
    await withSandbox(async ({ url }) => {
      const cases: Array<[object, string]> = [
        [jsCommands([createIou], { commandId: '' }), 'command_id'],
        [jsCommands([]), 'commands'],
        [jsCommands([createIou], { actAs: [] }), 'party or act_as'],
        [jsCommands([createIou], { userId: '' }), 'user_id'],
        [
          jsCommands([{ ExerciseCommand: { templateId: IOU, contractId: '', choice: 'Archive', choiceArgument: {} } }]),
          'contract_id',
        ],
      ];
      for (const [commands, field] of cases) {
        const body = await expectCantonError(await postJson(`${url}${SUBMIT}`, { commands }), {
          status: 400,
          code: 'MISSING_FIELD',
          category: 8,
        });
        expect(body['cause']).toBe(`The submitted command is missing a mandatory field: ${field}`);
        expect(body['context']).toMatchObject({ field_name: field, definite_answer: 'false' });
      }
      const withToken = await postJson(
        `${url}${SUBMIT}`,
        { commands: jsCommands([createIou], { userId: undefined }) },
        { authorization: `Bearer ${unsignedJwt({ sub: 'alice' })}` },
      );
      expect(withToken.status).toBe(200);
    });
  });

  it('validates the transaction format', async () => {
    await withSandbox(async ({ url }) => {
      const commands = jsCommands([createIou]);
      const missingEventFormat = await expectCantonError(
        await postJson(`${url}${SUBMIT}`, {
          commands,
          transactionFormat: { transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA' },
        }),
        { status: 400, code: 'MISSING_FIELD', category: 8 },
      );
      expect(missingEventFormat['context']['field_name']).toBe('event_format');
      const unspecifiedShape = await expectCantonError(
        await postJson(`${url}${SUBMIT}`, {
          commands,
          transactionFormat: {
            eventFormat: ledgerEffects.eventFormat,
            transactionShape: 'TRANSACTION_SHAPE_UNSPECIFIED',
          },
        }),
        { status: 400, code: 'MISSING_FIELD', category: 8 },
      );
      expect(unspecifiedShape['context']['field_name']).toBe('transaction_shape');
      const noFilters = await expectCantonError(
        await postJson(`${url}${SUBMIT}`, {
          commands,
          transactionFormat: { eventFormat: {}, transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA' },
        }),
        { status: 400, code: 'INVALID_ARGUMENT', category: 8 },
      );
      expect(noFilters['cause']).toBe(
        'The submitted request has invalid arguments: filtersByParty and filtersForAnyParty cannot be empty simultaneously',
      );
      expect((await readJson(await fetch(`${url}/v2/state/ledger-end`))).offset).toBe(1);
    });
  });

  it('answers ExerciseByKeyCommand with a Canton-like preprocessing error', async () => {
    await withSandbox(async ({ url }) => {
      const command = {
        ExerciseByKeyCommand: { templateId: IOU, contractKey: {}, choice: 'Archive', choiceArgument: {} },
      };
      await expectCantonError(await postJson(`${url}${SUBMIT}`, { commands: jsCommands([command]) }), {
        status: 400,
        code: 'COMMAND_PREPROCESSING_FAILED',
        category: 8,
      });
    });
  });

  it('resolves a #package-name template id to the newest package of that name', async () => {
    await withSandbox(async ({ url }) => {
      const command = {
        CreateCommand: { templateId: SANDBOX_SEED.templates.iouByPackageName, createArguments: iouArguments },
      };
      const { transaction } = await readJson(await postJson(`${url}${SUBMIT}`, { commands: jsCommands([command]) }));
      expect(transaction.events[0].CreatedEvent.templateId).toBe(`${SANDBOX_SEED.packages.iouV2.packageId}:Iou:Iou`);
    });
  });

  it('holds a submission in flight for submitDelayMs and still answers it while closing', async () => {
    const sandbox = await startSandbox({ submitDelayMs: 300 });
    let closing: Promise<void> | undefined;
    try {
      const started = Date.now();
      const inFlight = postJson(`${sandbox.url}/v2/commands/submit-and-wait`, jsCommands([createIou]));
      await new Promise((resolve) => setTimeout(resolve, 100));
      closing = sandbox.close();
      const response = await inFlight;
      expect(response.status).toBe(200);
      expect((await readJson(response)).completionOffset).toBe(2);
      expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    } finally {
      await (closing ?? sandbox.close());
    }
  });
});
