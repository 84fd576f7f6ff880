import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { updateVettedPackagesRule } from '../../../src/policy/rules/update-vetted-packages.js';
import { requestSchemaName, spacing, toJsonText, requestBodiesPerVersion } from '../support/openapi-arbitrary.js';
import { codeOf, judge } from '../support/judge.js';
import { vettingRefinements } from '../support/refinements.js';

const check = (body: unknown) => judge(updateVettedPackagesRule, body);
const vet = (packages: unknown[]) => ({ operation: { Vet: { value: { packages } } } });
const unvet = (packages: unknown[]) => ({ operation: { Unvet: { value: { packages } } } });
const PKG = '3f1c0000000000000000000000000000000000000000000000000000000000e9';

describe('updateVettedPackages rule', () => {
  it("accepts the documented request (Canton's OpenAPI UpdateVettedPackagesRequest)", () => {
    expect(
      check({
        changes: [
          {
            operation: {
              Vet: {
                value: {
                  packages: [{ packageName: 'my-app', packageVersion: '1.2.0' }],
                  newValidFromInclusive: '2026-01-01T00:00:00Z',
                },
              },
            },
          },
          unvet([{ packageId: PKG }]),
        ],
        dryRun: false,
        synchronizerId: 'global-domain::1220ab',
        expectedTopologySerial: { serial: { Prior: { value: 4 } } },
        updateVettedPackagesForceFlags: [],
      }),
    ).toBeUndefined();
  });

  it("refuses an empty or missing change list (the gateway's own rule)", () => {
    expect(check({ changes: [] })).toMatchObject({
      cause: 'The submitted command is missing a mandatory field: changes',
      context: { field_name: 'changes' },
    });
    expect(codeOf(check({}))).toBe('MISSING_FIELD');
    expect(codeOf(check({ changes: 'x' }))).toBe('DECODE_FAILURE');
  });

  it('refuses an Empty or missing operation as Canton does: PROTO_DESERIALIZATION_FAILURE', () => {
    for (const change of [{ operation: { Empty: {} } }, {}]) {
      expect(check({ changes: [change] })).toMatchObject({
        definition: { code: 'PROTO_DESERIALIZATION_FAILURE' },
        cause: 'Deserialization of protobuf message failed',
        context: { reason: 'FieldNotSet(operation)' },
      });
    }
  });

  it('refuses an operation object without a known variant, and a variant without its value', () => {
    expect(codeOf(check({ changes: [{ operation: {} }] }))).toBe('DECODE_FAILURE');
    expect(codeOf(check({ changes: [{ operation: { Revet: {} } }] }))).toBe('DECODE_FAILURE');
    expect(codeOf(check({ changes: [{ operation: { Vet: {} } }] }))).toBe('DECODE_FAILURE');
    expect(codeOf(check({ changes: [{ operation: { Vet: { value: [] } } }] }))).toBe('DECODE_FAILURE');
    expect(codeOf(check({ changes: [{ operation: null }] }))).toBe('DECODE_FAILURE');
  });

  it('accepts an operation with several variant keys when any of them is acceptable (the decoder picks one)', () => {
    expect(
      check({ changes: [{ operation: { Empty: {}, Vet: { value: { packages: [{ packageId: PKG }] } } } }] }),
    ).toBeUndefined();
    expect(codeOf(check({ changes: [{ operation: { Empty: {}, Unvet: { value: { packages: [] } } } }] }))).toBe(
      'PROTO_DESERIALIZATION_FAILURE',
    );
  });

  it("refuses a Vet or Unvet with no packages (the gateway's own rule)", () => {
    expect(check({ changes: [vet([])] })).toMatchObject({
      definition: { code: 'MISSING_FIELD' },
      context: { field_name: 'changes[0].packages' },
    });
    expect(codeOf(check({ changes: [vet([{ packageId: PKG }]), { operation: { Unvet: { value: {} } } }] }))).toBe(
      'MISSING_FIELD',
    );
  });

  it('accepts exactly the package reference combinations Canton accepts', () => {
    const accepted = [
      { packageId: PKG },
      { packageName: 'a' },
      { packageName: 'a', packageVersion: '1.0' },
      { packageId: PKG, packageName: 'a', packageVersion: '1.0' },
      { packageId: PKG, packageName: '', packageVersion: '' },
    ];
    for (const ref of accepted) expect(check({ changes: [vet([ref])] }), JSON.stringify(ref)).toBeUndefined();
    const refused = [
      {},
      { packageVersion: '1.0' },
      { packageId: PKG, packageName: 'a' },
      { packageId: PKG, packageVersion: '1.0' },
      { packageId: '', packageName: '' },
    ];
    for (const ref of refused) {
      expect(check({ changes: [unvet([ref])] }), JSON.stringify(ref)).toMatchObject({
        definition: { code: 'PROTO_DESERIALIZATION_FAILURE' },
      });
    }
  });

  it('checks the topology serial: Prior > 0 (int32), NoPrior and Empty pass', () => {
    const withSerial = (serial: unknown) =>
      check({ changes: [vet([{ packageId: PKG }])], expectedTopologySerial: { serial } });
    expect(withSerial({ Prior: { value: 1 } })).toBeUndefined();
    expect(withSerial({ Prior: { value: 2147483647 } })).toBeUndefined();
    expect(withSerial({ NoPrior: {} })).toBeUndefined();
    expect(withSerial({ Empty: {} })).toBeUndefined();
    expect(check({ changes: [vet([{ packageId: PKG }])], expectedTopologySerial: {} })).toBeUndefined();
    expect(codeOf(withSerial({ Prior: { value: 0 } }))).toBe('PROTO_DESERIALIZATION_FAILURE');
    expect(codeOf(withSerial({ Prior: { value: -3 } }))).toBe('PROTO_DESERIALIZATION_FAILURE');
    expect(codeOf(withSerial({ Prior: {} }))).toBe('PROTO_DESERIALIZATION_FAILURE');
    expect(codeOf(withSerial({ Prior: { value: 2147483648 } }))).toBe('DECODE_FAILURE');
    expect(codeOf(withSerial({ Latest: {} }))).toBe('DECODE_FAILURE');
  });

  it('checks force flags against the enum and the JSON types of the rest', () => {
    const base = { changes: [vet([{ packageId: PKG }])] };
    expect(
      check({
        ...base,
        updateVettedPackagesForceFlags: ['UPDATE_VETTED_PACKAGES_FORCE_FLAG_ALLOW_UNVETTED_DEPENDENCIES'],
      }),
    ).toBeUndefined();
    expect(check({ ...base, updateVettedPackagesForceFlags: ['FORCE'] })?.cause).toMatch(
      /^Unrecognized enum value FORCE\. Supported values: \[.*\] at 'updateVettedPackagesForceFlags\[0\]'$/,
    );
    // ScalaPB's fromName knows the declared names only: "UNRECOGNIZED" does not decode.
    expect(check({ ...base, updateVettedPackagesForceFlags: ['UNRECOGNIZED'] })?.cause).toMatch(
      /^Unrecognized enum value UNRECOGNIZED\./,
    );
    expect(codeOf(check({ ...base, dryRun: 'yes' }))).toBe('DECODE_FAILURE');
    expect(codeOf(check({ ...base, synchronizerId: 7 }))).toBe('DECODE_FAILURE');
    expect(check({ ...base, dryRun: true, somethingNew: { x: 1 } })).toBeUndefined();
  });

  it("reports decode problems before Canton's own checks", () => {
    expect(codeOf(check({ changes: [{ operation: { Empty: {} } }], dryRun: 1 }))).toBe('DECODE_FAILURE');
  });

  describe('property: bodies generated from the OpenAPI schema', () => {
    for (const { version, spec, bodies } of requestBodiesPerVersion(
      'post',
      '/v2/package-vetting/update',
      vettingRefinements,
    )) {
      it(`${version}: the old and the new route share the request type`, () => {
        expect(requestSchemaName(spec, 'post', '/v2/package-vetting')).toBe(
          requestSchemaName(spec, 'post', '/v2/package-vetting/update'),
        );
      });

      it(`${version}: every valid body passes`, () => {
        fc.assert(
          fc.property(bodies, spacing, (body, space) => check(toJsonText(body, space)) === undefined),
          { numRuns: 300 },
        );
      });

      it(`${version}: every generated violation is refused with the right code`, () => {
        const mutations: Array<[string, (body: Record<string, unknown>) => unknown, string]> = [
          ['no changes', (b) => ({ ...b, changes: [] }), 'MISSING_FIELD'],
          [
            'an Empty operation',
            (b) => ({ ...b, changes: [...(b.changes as unknown[]), { operation: { Empty: {} } }] }),
            'PROTO_DESERIALIZATION_FAILURE',
          ],
          [
            'no operation',
            (b) => ({ ...b, changes: [{}, ...(b.changes as unknown[])] }),
            'PROTO_DESERIALIZATION_FAILURE',
          ],
          ['an empty Vet', (b) => ({ ...b, changes: [vet([])] }), 'MISSING_FIELD'],
          [
            'a ref without id or name',
            (b) => ({ ...b, changes: [unvet([{ packageVersion: '1' }])] }),
            'PROTO_DESERIALIZATION_FAILURE',
          ],
          [
            'a zero serial',
            (b) => ({ ...b, expectedTopologySerial: { serial: { Prior: { value: 0 } } } }),
            'PROTO_DESERIALIZATION_FAILURE',
          ],
          ['an unknown force flag', (b) => ({ ...b, updateVettedPackagesForceFlags: ['NOPE'] }), 'DECODE_FAILURE'],
          ['dryRun not a boolean', (b) => ({ ...b, dryRun: 'false' }), 'DECODE_FAILURE'],
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
