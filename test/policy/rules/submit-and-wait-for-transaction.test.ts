import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  submitAndWaitForTransactionRule,
  templateIdProblem,
} from '../../../src/policy/rules/submit-and-wait-for-transaction.js';
import type { RuleContext } from '../../../src/policy/violation.js';
import { spacing, toJsonText, requestBodiesPerVersion } from '../support/openapi-arbitrary.js';
import { codeOf, judge, principal } from '../support/judge.js';
import { submitRefinements, templateId } from '../support/refinements.js';

const TEMPLATE = '9a1b000000000000000000000000000000000000000000000000000000000000:Iou:Iou';
const create = {
  CreateCommand: {
    templateId: TEMPLATE,
    createArguments: { issuer: 'Alice::1220', owner: 'Alice::1220', currency: 'USD', amount: '999.99', observers: [] },
  },
};
const request = (commands: Record<string, unknown> = {}, rest: Record<string, unknown> = {}) => ({
  commands: { commands: [create], commandId: 'cmd-7f3a', actAs: ['Alice::1220'], ...commands },
  ...rest,
});
const check = (body: unknown, who: RuleContext['principal'] = principal('alice')) =>
  judge(submitAndWaitForTransactionRule, body, { principal: who });

describe('submitAndWaitForTransaction rule', () => {
  it("accepts the documented request (Canton's OpenAPI JsSubmitAndWaitForTransactionRequest)", () => {
    expect(
      check(
        request(
          { userId: 'alice' },
          {
            transactionFormat: {
              eventFormat: { filtersByParty: { 'Alice::1220': { cumulative: [] } }, verbose: true },
              transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
            },
          },
        ),
      ),
    ).toBeUndefined();
  });

  it("accepts an absent or empty userId: the participant takes the token's user", () => {
    expect(check(request())).toBeUndefined();
    expect(check(request({ userId: '' }))).toBeUndefined();
  });

  it("refuses another user's userId from a user token: redacted PERMISSION_DENIED", () => {
    const violation = check(request({ userId: 'bob' }));
    expect(violation).toMatchObject({ definition: { code: 'PERMISSION_DENIED', redacted: true } });
    expect(violation?.reason).not.toContain('bob');
    expect(check(request({ userId: 'bob' }), null)).toBeUndefined(); // no principal (public operation): the participant decides
  });

  it("accepts both template id forms and refuses what Canton's IdentifierConverter cannot split", () => {
    expect(templateIdProblem(TEMPLATE)).toBeUndefined();
    expect(templateIdProblem('#my-app:Main.Sub:Asset')).toBeUndefined();
    expect(templateIdProblem('pkg:Mod:Ent:')).toBeUndefined(); // Java split drops the trailing empty part
    expect(templateIdProblem('not-a-valid-template-id')).toBe(
      'Invalid identifier format (not-a-valid-template-id) not matching the expected format (<package>:<moduleName>:<entityName>)',
    );
    for (const bad of ['a:b', 'a:b:c:d', '', '::', 'pkg::Ent', ':Mod:Ent', '#:Mod:Ent'])
      expect(templateIdProblem(bad), bad).toBeDefined();
    // Canton's decode failure, word for word as Canton's JsonV2Tests expect it (there for a body rooted at the command list).
    expect(
      check(
        request({ commands: [{ CreateCommand: { ...create.CreateCommand, templateId: 'not-a-valid-template-id' } }] }),
      ),
    ).toMatchObject({
      definition: { code: 'DECODE_FAILURE' },
      cause:
        "Invalid identifier format (not-a-valid-template-id) not matching the expected format (<package>:<moduleName>:<entityName>) at 'commands.commands[0].CreateCommand.templateId'",
    });
  });

  it('requires the strict JsCommands fields', () => {
    // A strict mirror type: a missing field is the JSON decoder's refusal (`JsCommandService.scala`), not MISSING_FIELD.
    expect(check({})).toMatchObject({
      definition: { code: 'DECODE_FAILURE' },
      cause: "Missing required field at 'commands'",
    });
    expect(check({ commands: [] })).toMatchObject({
      definition: { code: 'DECODE_FAILURE' },
      cause: "Got value with wrong type, expecting object at 'commands'",
    });
    const { commandId: _c, ...withoutId } = request().commands;
    expect(check({ commands: withoutId })?.cause).toBe("Missing required field at 'commands.commandId'");
    const { actAs: _a, ...withoutActAs } = request().commands;
    expect(check({ commands: withoutActAs })?.cause).toBe("Missing required field at 'commands.actAs'");
    const { commands: _l, ...withoutList } = request().commands;
    expect(check({ commands: withoutList })?.cause).toBe("Missing required field at 'commands.commands'");
  });

  it('validates as CommandsValidator does: command_id, act_as, then commands', () => {
    expect(check(request({ commandId: '' }))?.cause).toBe(
      'The submitted command is missing a mandatory field: command_id',
    );
    expect(check(request({ actAs: [] }))?.cause).toBe(
      'The submitted command is missing a mandatory field: party or act_as',
    );
    expect(check(request({ commands: [] }))?.cause).toBe(
      'The submitted command is missing a mandatory field: commands',
    );
    expect(codeOf(check(request({ commandId: '', actAs: [], commands: [] })))).toBe('MISSING_FIELD');
  });

  it('requires exactly the fields of each command variant', () => {
    const withCommand = (command: unknown) => check(request({ commands: [command] }));
    expect(
      withCommand({
        ExerciseCommand: {
          templateId: TEMPLATE,
          contractId: '00ab',
          choice: 'Transfer',
          choiceArgument: { newOwner: 'Bob' },
        },
      }),
    ).toBeUndefined();
    expect(
      withCommand({
        CreateAndExerciseCommand: { templateId: TEMPLATE, createArguments: {}, choice: 'Go', choiceArgument: {} },
      }),
    ).toBeUndefined();
    expect(
      withCommand({
        ExerciseByKeyCommand: { templateId: TEMPLATE, contractKey: 'k', choice: 'Go', choiceArgument: null },
      }),
    ).toBeUndefined();
    expect(
      withCommand({ ExerciseCommand: { templateId: TEMPLATE, contractId: '00ab', choiceArgument: {} } })?.cause,
    ).toBe("Missing required field at 'commands.commands[0].ExerciseCommand.choice'");
    expect(withCommand({ CreateCommand: { templateId: TEMPLATE } })?.cause).toBe(
      "Missing required field at 'commands.commands[0].CreateCommand.createArguments'",
    );
    expect(
      withCommand({ ExerciseCommand: { templateId: TEMPLATE, contractId: '', choice: 'Go', choiceArgument: {} } })
        ?.cause,
    ).toBe('The submitted command is missing a mandatory field: contract_id');
    expect(
      codeOf(
        withCommand({ ExerciseCommand: { templateId: TEMPLATE, contractId: 1, choice: 'Go', choiceArgument: {} } }),
      ),
    ).toBe('DECODE_FAILURE');
    expect(codeOf(withCommand({}))).toBe('DECODE_FAILURE');
    expect(codeOf(withCommand({ ArchiveCommand: {} }))).toBe('DECODE_FAILURE');
    expect(codeOf(withCommand('CreateCommand'))).toBe('DECODE_FAILURE');
    // Two variant keys: the decoder picks one, so one acceptable variant is enough.
    expect(withCommand({ CreateCommand: create.CreateCommand, ExerciseCommand: {} })).toBeUndefined();
  });

  it("checks the deduplication period variants and the optional fields' types", () => {
    expect(
      check(request({ deduplicationPeriod: { DeduplicationDuration: { value: { seconds: 30, nanos: 0 } } } })),
    ).toBeUndefined();
    expect(
      check(request({ deduplicationPeriod: { DeduplicationOffset: { value: 9223372036854775807n } } })),
    ).toBeUndefined();
    expect(
      check(
        request({ deduplicationPeriod: { Empty: {} }, readAs: [], workflowId: 'w', minLedgerTimeRel: { seconds: 1 } }),
      ),
    ).toBeUndefined();
    expect(codeOf(check(request({ deduplicationPeriod: { DeduplicationOffset: { value: 2n ** 63n } } })))).toBe(
      'DECODE_FAILURE',
    );
    expect(check(request({ deduplicationPeriod: { DeduplicationDuration: {} } }))?.cause).toBe(
      "Missing required field at 'commands.deduplicationPeriod.DeduplicationDuration.value'",
    );
    expect(codeOf(check(request({ deduplicationPeriod: { Forever: {} } })))).toBe('DECODE_FAILURE');
    expect(codeOf(check(request({ deduplicationPeriod: {} })))).toBe('DECODE_FAILURE');
    expect(check(request({ readAs: 'Bob' }))?.cause).toBe(
      "Got value with wrong type, expecting array of strings at 'commands.readAs'",
    );
    expect(check(request({ actAs: [1] }))?.cause).toBe(
      "Got value with wrong type, expecting string at 'commands.actAs[0]'",
    );
    expect(codeOf(check(request({ tapsMaxPasses: 2 ** 31 })))).toBe('DECODE_FAILURE');
    expect(check(request({ somethingNew: true, synchronizerId: null }))).toBeUndefined();
  });

  it('validates a given transaction format as FormatValidator does', () => {
    expect(check(request({}, { transactionFormat: { eventFormat: { filtersForAnyParty: {} } } }))?.cause).toBe(
      'The submitted command is missing a mandatory field: transaction_shape',
    );
    expect(
      check(request({}, { transactionFormat: { transactionShape: 'TRANSACTION_SHAPE_LEDGER_EFFECTS' } }))?.cause,
    ).toBe('The submitted command is missing a mandatory field: event_format');
    expect(
      codeOf(
        check(
          request({}, { transactionFormat: { transactionShape: 'TRANSACTION_SHAPE_LEDGER_EFFECTS', eventFormat: {} } }),
        ),
      ),
    ).toBe('INVALID_ARGUMENT');
    expect(codeOf(check(request({}, { transactionFormat: 'ACS' })))).toBe('DECODE_FAILURE');
    expect(check(request({}, { transactionFormat: null }))).toBeUndefined();
  });

  describe('property: bodies generated from the OpenAPI schema', () => {
    for (const { version, bodies } of requestBodiesPerVersion(
      'post',
      '/v2/commands/submit-and-wait-for-transaction',
      submitRefinements,
    )) {
      type Body = { commands: Record<string, unknown>; transactionFormat?: unknown };

      it(`${version}: every valid body passes (no principal, and the submitting user's own token)`, () => {
        fc.assert(
          fc.property(bodies, spacing, (body, space) => check(toJsonText(body, space), null) === undefined),
          { numRuns: 200 },
        );
        fc.assert(
          fc.property(bodies, fc.boolean(), (body, withUserId) => {
            const { userId: _userId, ...commands } = (body as Body).commands;
            const own = { ...(body as Body), commands: withUserId ? { ...commands, userId: 'alice' } : commands };
            return check(toJsonText(own), principal('alice')) === undefined;
          }),
          { numRuns: 100 },
        );
      });

      it(`${version}: every generated violation is refused with the right code`, () => {
        const mutations: Array<[string, (body: Body) => unknown, string]> = [
          ['another user', (b) => ({ ...b, commands: { ...b.commands, userId: 'mallory' } }), 'PERMISSION_DENIED'],
          ['an empty command list', (b) => ({ ...b, commands: { ...b.commands, commands: [] } }), 'MISSING_FIELD'],
          ['an empty command id', (b) => ({ ...b, commands: { ...b.commands, commandId: '' } }), 'MISSING_FIELD'],
          ['no actAs', (b) => ({ ...b, commands: { ...b.commands, actAs: [] } }), 'MISSING_FIELD'],
          ['no commands object', ({ commands: _commands, ...b }) => b, 'DECODE_FAILURE'],
          [
            'a two-part template id',
            (b) => ({
              ...b,
              commands: {
                ...b.commands,
                commands: [{ CreateCommand: { templateId: 'Mod:Ent', createArguments: {} } }],
              },
            }),
            'DECODE_FAILURE',
          ],
          [
            'an unknown command',
            (b) => ({ ...b, commands: { ...b.commands, commands: [{ DeleteCommand: {} }] } }),
            'DECODE_FAILURE',
          ],
          [
            'an unspecified shape',
            (b) => ({
              ...b,
              transactionFormat: {
                transactionShape: 'TRANSACTION_SHAPE_UNSPECIFIED',
                eventFormat: { filtersForAnyParty: {} },
              },
            }),
            'MISSING_FIELD',
          ],
        ];
        fc.assert(
          fc.property(bodies, fc.constantFrom(...mutations), (body, [, mutate, code]) => {
            const own = { ...(body as Body), commands: { ...(body as Body).commands, userId: 'alice' } };
            expect(codeOf(check(toJsonText(mutate(own)), principal('alice')))).toBe(code);
          }),
          { numRuns: 200 },
        );
      });
    }

    it('the template id generator covers both forms, all accepted', () => {
      fc.assert(fc.property(templateId, (id) => templateIdProblem(id) === undefined));
    });
  });
});
