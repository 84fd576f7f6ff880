import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { getUpdateByOffsetRule } from '../../../src/policy/rules/get-update-by-offset.js';
import { spacing, toJsonText, requestBodiesPerVersion } from '../support/openapi-arbitrary.js';
import { codeOf, judge } from '../support/judge.js';
import { updateByOffsetRefinements } from '../support/refinements.js';

const updateFormat = {
  includeTransactions: {
    eventFormat: {
      filtersByParty: {
        'Alice::1220ab': {
          cumulative: [{ identifierFilter: { WildcardFilter: { value: { includeCreatedEventBlob: false } } } }],
        },
      },
      verbose: true,
    },
    transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
  },
};
const check = (body: unknown) => judge(getUpdateByOffsetRule, body);

describe('getUpdateByOffset rule', () => {
  it("accepts the documented request (Canton's OpenAPI GetUpdateByOffsetRequest)", () => {
    expect(check({ offset: 42, updateFormat })).toBeUndefined();
  });

  it('judges the offset on its exact digits: int64 max passes, one more does not', () => {
    expect(check(`{"offset": 9223372036854775807, "updateFormat": ${JSON.stringify(updateFormat)}}`)).toBeUndefined();
    const over = check(`{"offset": 9223372036854775808, "updateFormat": ${JSON.stringify(updateFormat)}}`);
    expect(codeOf(over)).toBe('DECODE_FAILURE'); // the JSON decoder's refusal: 400 text/plain
    expect(over?.cause).toMatch(/ at 'offset'$/);
  });

  it("answers a zero, negative or absent offset with Canton's NON_POSITIVE_OFFSET cause", () => {
    expect(check({ offset: 0, updateFormat })).toMatchObject({
      cause: 'Offset 0 in offset is not a positive integer: the offset has to be a positive integer (>0)',
    });
    expect(check({ offset: -5, updateFormat })?.cause).toBe(
      'Offset -5 in offset is not a positive integer: the offset has to be a positive integer (>0)',
    );
    expect(check(`{"offset": -9223372036854775808, "updateFormat": {}}`)?.cause).toContain(
      'Offset -9223372036854775808 in offset',
    );
    expect(codeOf(check({ updateFormat }))).toBe('NON_POSITIVE_OFFSET');
  });

  it('reads offsets as circe does: whole numbers in any notation, numeric strings', () => {
    for (const offset of ['42.0', '4.2e1', '420e-1', '"42"', '"+42"']) {
      expect(check(`{"offset": ${offset}, "updateFormat": {}}`), offset).toBeUndefined();
    }
    for (const offset of ['1.5', '1e400', '"abc"', 'null', 'true', '[]', '{}', '"42 "']) {
      expect(codeOf(check(`{"offset": ${offset}, "updateFormat": {}}`)), offset).toBe('DECODE_FAILURE');
    }
  });

  it("requires updateFormat, after the offset (Canton's order)", () => {
    const violation = check({ offset: 5 });
    expect(violation).toMatchObject({
      cause: 'The submitted command is missing a mandatory field: update_format',
      context: { field_name: 'update_format' },
    });
    expect(codeOf(check({ offset: 0 }))).toBe('NON_POSITIVE_OFFSET');
    expect(codeOf(check({ offset: 5, updateFormat: null }))).toBe('MISSING_FIELD');
  });

  it('validates the transaction format as FormatValidator does', () => {
    const withShape = (transactionShape: unknown) =>
      check({
        offset: 1,
        updateFormat: { includeTransactions: { ...updateFormat.includeTransactions, transactionShape } },
      });
    expect(withShape('TRANSACTION_SHAPE_UNSPECIFIED')?.cause).toBe(
      'The submitted command is missing a mandatory field: transaction_shape',
    );
    expect(withShape('TRANSACTION_SHAPE_LEDGER_EFFECTS')).toBeUndefined();
    expect(codeOf(withShape('SHAPE'))).toBe('DECODE_FAILURE');
    // ScalaPB's fromName knows the declared names only: "UNRECOGNIZED" does not decode either.
    expect(withShape('UNRECOGNIZED')).toMatchObject({
      definition: { code: 'DECODE_FAILURE' },
      cause:
        "Unrecognized enum value UNRECOGNIZED. Supported values: [TRANSACTION_SHAPE_UNSPECIFIED, TRANSACTION_SHAPE_ACS_DELTA, TRANSACTION_SHAPE_LEDGER_EFFECTS] at 'updateFormat.includeTransactions.transactionShape'",
    });
    expect(
      check({ offset: 1, updateFormat: { includeTransactions: { transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA' } } })
        ?.cause,
    ).toBe('The submitted command is missing a mandatory field: event_format');
    const empty = check({
      offset: 1,
      updateFormat: {
        includeTransactions: {
          transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
          eventFormat: { filtersByParty: {}, verbose: true },
        },
      },
    });
    expect(empty).toMatchObject({
      definition: { code: 'INVALID_ARGUMENT' },
      cause:
        'The submitted request has invalid arguments: filtersByParty and filtersForAnyParty cannot be empty simultaneously',
    });
    expect(
      check({
        offset: 1,
        updateFormat: {
          includeTransactions: {
            transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
            eventFormat: { filtersForAnyParty: {} },
          },
        },
      }),
    ).toBeUndefined();
    expect(codeOf(check({ offset: 1, updateFormat: { includeReassignments: {} } }))).toBe('INVALID_ARGUMENT');
  });

  it('leaves to the participant what it answers itself (404 for no format, unknown fields)', () => {
    expect(check({ offset: 1, updateFormat: {} })).toBeUndefined();
    expect(
      check({
        offset: 1,
        updateFormat: { includeTopologyEvents: { includeParticipantAuthorizationEvents: {} } },
        extra: [1, 2],
      }),
    ).toBeUndefined();
  });

  it('refuses wrong JSON types with the field path', () => {
    expect(check({ offset: 1, updateFormat: { includeTransactions: [] } })).toMatchObject({
      definition: { code: 'DECODE_FAILURE' },
      cause: "Got value with wrong type, expecting object at 'updateFormat.includeTransactions'",
    });
    expect(
      check({
        offset: 1,
        updateFormat: { includeTopologyEvents: { includeParticipantAuthorizationEvents: { parties: [1] } } },
      })?.cause,
    ).toContain('updateFormat.includeTopologyEvents.includeParticipantAuthorizationEvents.parties[0]');
  });

  describe('property: bodies generated from the OpenAPI schema', () => {
    for (const { version, bodies } of requestBodiesPerVersion(
      'post',
      '/v2/updates/update-by-offset',
      updateByOffsetRefinements,
    )) {
      it(`${version}: every valid body passes`, () => {
        fc.assert(
          fc.property(bodies, spacing, (body, space) => check(toJsonText(body, space)) === undefined),
          { numRuns: 300 },
        );
      });

      it(`${version}: every generated violation is refused with the right code`, () => {
        const mutations: Array<[string, (body: Record<string, unknown>) => unknown, string]> = [
          ['offset 0', (b) => ({ ...b, offset: 0 }), 'NON_POSITIVE_OFFSET'],
          ['negative offset', (b) => ({ ...b, offset: -(2n ** 40n) }), 'NON_POSITIVE_OFFSET'],
          ['no offset', ({ offset: _offset, ...b }) => b, 'NON_POSITIVE_OFFSET'],
          ['offset above int64', (b) => ({ ...b, offset: 2n ** 63n }), 'DECODE_FAILURE'],
          ['fractional offset', (b) => ({ ...b, offset: 1.5 }), 'DECODE_FAILURE'],
          ['no updateFormat', ({ updateFormat: _format, ...b }) => b, 'MISSING_FIELD'],
          [
            'unspecified shape',
            (b) => ({
              ...b,
              updateFormat: {
                includeTransactions: {
                  transactionShape: 'TRANSACTION_SHAPE_UNSPECIFIED',
                  eventFormat: { filtersForAnyParty: {} },
                },
              },
            }),
            'MISSING_FIELD',
          ],
          [
            'empty filters',
            (b) => ({ ...b, updateFormat: { includeReassignments: { verbose: false } } }),
            'INVALID_ARGUMENT',
          ],
        ];
        fc.assert(
          fc.property(bodies, fc.constantFrom(...mutations), (body, [, mutate, code]) => {
            expect(codeOf(check(toJsonText(mutate(body as Record<string, unknown>))))).toBe(code);
          }),
          { numRuns: 200 },
        );
      });
    }
  });
});
