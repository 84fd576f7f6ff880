import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { INT32_MAX, INT64_MAX, readInteger } from '../../src/policy/numbers.js';
import { getUpdateByOffsetRule } from '../../src/policy/rules/get-update-by-offset.js';
import { REQUEST_RULES } from '../../src/policy/rules/index.js';
import { submitAndWaitForTransactionRule } from '../../src/policy/rules/submit-and-wait-for-transaction.js';
import { updateVettedPackagesRule } from '../../src/policy/rules/update-vetted-packages.js';
import type { RequestRule } from '../../src/policy/violation.js';
import { codeOf, judge } from './support/judge.js';

describe("readInteger (circe's Long and Int)", () => {
  it('reads whole numbers in any notation and numeric strings, exactly', () => {
    const cases: Array<[unknown, string | undefined, bigint | undefined]> = [
      [1, '9223372036854775807', INT64_MAX],
      [1, '9223372036854775808', undefined],
      [1, '-9223372036854775808', -(2n ** 63n)],
      [1, '1e18', 10n ** 18n],
      [1, '1e19', undefined],
      [1, '10.0', 10n],
      [1, '0.5e1', 5n],
      [1, '1.5', undefined],
      [1, `1${'0'.repeat(200_000)}e-200000`, 1n],
      [1, `1${'0'.repeat(200_000)}`, undefined],
      [0, '0e99999999999', 0n],
      [1, '1e-99999999999', undefined],
      ['42', undefined, 42n],
      ['+42', undefined, 42n],
      ['0042', undefined, 42n],
      ['4.2e1', undefined, 42n],
      [' 42', undefined, undefined],
      [null, undefined, undefined],
      [true, undefined, undefined],
    ];
    for (const [value, source, expected] of cases) {
      const reading = readInteger(value, source, -(2n ** 63n), INT64_MAX);
      expect(reading.ok ? reading.value : undefined, `${JSON.stringify(value)} ${source}`).toBe(expected);
    }
  });

  it('property: agrees with BigInt on every int64 written plainly', () => {
    fc.assert(
      fc.property(fc.bigInt(-(2n ** 63n), INT64_MAX), (n) => {
        const reading = readInteger(Number(n), n.toString(), -(2n ** 63n), INT64_MAX);
        expect(reading).toEqual({ ok: true, value: n });
      }),
    );
  });
});

describe('the integers a rule judges on their exact digits', () => {
  const format = {
    includeTransactions: {
      eventFormat: { filtersByParty: { Alice: {} } },
      transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
    },
  };
  const command = { CreateCommand: { templateId: 'p:M:E', createArguments: {} } };
  const commands = (extra: object) => ({
    commands: { commands: [command], commandId: 'c', actAs: ['Alice'], ...extra },
  });
  const N = '__number__';
  // For each rule, a valid body per declared path with the number at that path, and the path's range.
  const bodies: Array<[string, RequestRule, object, bigint]> = [
    ['offset', getUpdateByOffsetRule, { offset: N, updateFormat: format }, INT64_MAX],
    ['commands.tapsMaxPasses', submitAndWaitForTransactionRule, commands({ tapsMaxPasses: N }), INT32_MAX],
    [
      'commands.minLedgerTimeRel.seconds',
      submitAndWaitForTransactionRule,
      commands({ minLedgerTimeRel: { seconds: N } }),
      INT64_MAX,
    ],
    [
      'commands.minLedgerTimeRel.nanos',
      submitAndWaitForTransactionRule,
      commands({ minLedgerTimeRel: { nanos: N } }),
      INT32_MAX,
    ],
    [
      'commands.deduplicationPeriod.DeduplicationDuration.value.seconds',
      submitAndWaitForTransactionRule,
      commands({ deduplicationPeriod: { DeduplicationDuration: { value: { seconds: N } } } }),
      INT64_MAX,
    ],
    [
      'commands.deduplicationPeriod.DeduplicationDuration.value.nanos',
      submitAndWaitForTransactionRule,
      commands({ deduplicationPeriod: { DeduplicationDuration: { value: { nanos: N } } } }),
      INT32_MAX,
    ],
    [
      'commands.deduplicationPeriod.DeduplicationOffset.value',
      submitAndWaitForTransactionRule,
      commands({ deduplicationPeriod: { DeduplicationOffset: { value: N } } }),
      INT64_MAX,
    ],
    [
      'expectedTopologySerial.serial.Prior.value',
      updateVettedPackagesRule,
      {
        changes: [{ operation: { Vet: { value: { packages: [{ packageId: 'p' }] } } } }],
        expectedTopologySerial: { serial: { Prior: { value: N } } },
      },
      INT32_MAX,
    ],
  ];

  it('covers every path a rule declares', () => {
    const declared = [...REQUEST_RULES.values()].flatMap((rule) => rule.exactNumbers);
    expect(bodies.map(([path]) => path).sort()).toEqual(declared.sort());
  });

  it.each(bodies)('%s: judged on the digits sent, where a double would round', (path, rule, body, max) => {
    expect(rule.exactNumbers).toContain(path);
    const withNumber = (literal: string) => judge(rule, JSON.stringify(body).replace(`"${N}"`, literal));
    // The range's end passes and one more does not, though both are the same double.
    expect(withNumber(String(max)), String(max)).toBeUndefined();
    expect(codeOf(withNumber(String(max + 1n))), String(max + 1n)).toBe('DECODE_FAILURE');
    // Not a whole number, though its double is 1.
    expect(codeOf(withNumber('1.0000000000000001')), '1.0000000000000001').toBe('DECODE_FAILURE');
    expect(withNumber(`1${'0'.repeat(9)}e-9`)).toBeUndefined();
  });
});
