import { describe, expect, it } from 'vitest';
import { SANDBOX_SEED } from '../../src/sandbox/app.js';
import { expectCantonError, expectDecodeFailure, postJson, readJson, withSandbox } from './helpers.js';

const ALICE = SANDBOX_SEED.parties.alice;
const BOB = SANDBOX_SEED.parties.bob;
const BY_OFFSET = '/v2/updates/update-by-offset';

const formatFor = (party: string, shape = 'TRANSACTION_SHAPE_ACS_DELTA') => ({
  includeTransactions: {
    eventFormat: {
      filtersByParty: {
        [party]: {
          cumulative: [{ identifierFilter: { WildcardFilter: { value: { includeCreatedEventBlob: false } } } }],
        },
      },
      verbose: true,
    },
    transactionShape: shape,
  },
});

describe('sandbox update-by-offset', () => {
  it('finds a submitted transaction at its offset', async () => {
    await withSandbox(async ({ url }) => {
      const submitted = await readJson(
        await postJson(`${url}/v2/commands/submit-and-wait-for-transaction`, {
          commands: {
            commands: [
              {
                CreateCommand: {
                  templateId: SANDBOX_SEED.templates.iou,
                  createArguments: { issuer: ALICE, owner: BOB },
                },
              },
            ],
            commandId: 'create-for-bob',
            actAs: [ALICE],
            userId: 'alice',
          },
        }),
      );
      const offset = submitted.transaction.offset;

      const response = await postJson(`${url}${BY_OFFSET}`, { offset, updateFormat: formatFor(ALICE) });
      expect(response.status).toBe(200);
      const { update } = await readJson(response);
      expect(update.Transaction.value).toEqual(submitted.transaction);

      // Bob is an observer: he sees the event, but not the command id of Alice's submission.
      const asBob = (await readJson(await postJson(`${url}${BY_OFFSET}`, { offset, updateFormat: formatFor(BOB) })))
        .update.Transaction.value;
      expect(asBob.commandId).toBe('');
      expect(asBob.events[0].CreatedEvent.witnessParties).toEqual([BOB]);

      const asString = await postJson(`${url}${BY_OFFSET}`, { offset: String(offset), updateFormat: formatFor(ALICE) });
      expect(asString.status).toBe(200);
    });
  });

  it('answers NON_POSITIVE_OFFSET for zero, negative and absent offsets', async () => {
    await withSandbox(async ({ url }) => {
      for (const [body, shown] of [
        [{ offset: 0 }, '0'],
        [{ offset: -5 }, '-5'],
        [{ updateFormat: formatFor(ALICE) }, '0'],
      ] as const) {
        const error = await expectCantonError(await postJson(`${url}${BY_OFFSET}`, body), {
          status: 400,
          code: 'NON_POSITIVE_OFFSET',
          category: 8,
        });
        expect(error['cause']).toBe(
          `Offset ${shown} in offset is not a positive integer: the offset has to be a positive integer (>0)`,
        );
      }
    });
  });

  it('answers MISSING_FIELD update_format', async () => {
    await withSandbox(async ({ url }) => {
      const error = await expectCantonError(await postJson(`${url}${BY_OFFSET}`, { offset: 1 }), {
        status: 400,
        code: 'MISSING_FIELD',
        category: 8,
      });
      expect(error['cause']).toBe('The submitted command is missing a mandatory field: update_format');
      expect(error['context']['field_name']).toBe('update_format');
    });
  });

  it('answers UPDATE_NOT_FOUND naming the exact offset, also beyond 2^53', async () => {
    await withSandbox(async ({ url }) => {
      for (const offset of ['2', '9007199254740993', '9223372036854775807']) {
        const error = await expectCantonError(
          await postJson(
            `${url}${BY_OFFSET}`,
            `{"offset": ${offset}, "updateFormat": ${JSON.stringify(formatFor(ALICE))}}`,
          ),
          { status: 404, code: 'UPDATE_NOT_FOUND', category: 11 },
        );
        expect(error['cause']).toBe('Update not found, or not visible.');
        expect(error['resources']).toEqual([['ErrorResource(OFFSET)', offset]]);
        expect(error['context']['definite_answer']).toBe('false');
      }
    });
  });

  it('answers UPDATE_NOT_FOUND when the format hides the transaction', async () => {
    await withSandbox(async ({ url }) => {
      const offset = SANDBOX_SEED.initialTransaction.offset;
      await expectCantonError(await postJson(`${url}${BY_OFFSET}`, { offset, updateFormat: formatFor(BOB) }), {
        status: 404,
        code: 'UPDATE_NOT_FOUND',
        category: 11,
      });
      await expectCantonError(await postJson(`${url}${BY_OFFSET}`, { offset, updateFormat: {} }), {
        status: 404,
        code: 'UPDATE_NOT_FOUND',
        category: 11,
      });
      const otherTemplate = {
        includeTransactions: {
          eventFormat: {
            filtersByParty: {
              [ALICE]: {
                cumulative: [{ identifierFilter: { TemplateFilter: { value: { templateId: '#other:Mod:Ent' } } } }],
              },
            },
          },
          transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
        },
      };
      await expectCantonError(await postJson(`${url}${BY_OFFSET}`, { offset, updateFormat: otherTemplate }), {
        status: 404,
        code: 'UPDATE_NOT_FOUND',
        category: 11,
      });
      const byName = structuredClone(otherTemplate);
      byName.includeTransactions.eventFormat.filtersByParty[
        ALICE
      ]!.cumulative[0]!.identifierFilter.TemplateFilter.value.templateId = '#sandbox-iou:Iou:Iou';
      expect((await postJson(`${url}${BY_OFFSET}`, { offset, updateFormat: byName })).status).toBe(200);
    });
  });

  it('validates the transaction format inside the update format', async () => {
    await withSandbox(async ({ url }) => {
      const error = await expectCantonError(
        await postJson(`${url}${BY_OFFSET}`, {
          offset: 1,
          updateFormat: { includeTransactions: { eventFormat: { filtersForAnyParty: {} } } },
        }),
        { status: 400, code: 'MISSING_FIELD', category: 8 },
      );
      expect(error['context']['field_name']).toBe('transaction_shape');
      const forAnyParty = await postJson(`${url}${BY_OFFSET}`, {
        offset: 1,
        updateFormat: {
          includeTransactions: {
            eventFormat: { filtersForAnyParty: {} },
            transactionShape: 'TRANSACTION_SHAPE_LEDGER_EFFECTS',
          },
        },
      });
      expect(forAnyParty.status).toBe(200);
    });
  });

  it('refuses offsets that are not int64 with a decode failure', async () => {
    await withSandbox(async ({ url }) => {
      await expectDecodeFailure(
        await postJson(`${url}${BY_OFFSET}`, '{"offset": 9223372036854775808, "updateFormat": {}}'),
      );
      await expectDecodeFailure(await postJson(`${url}${BY_OFFSET}`, '{"offset": 1.5, "updateFormat": {}}'));
    });
  });
});
