// What Canton requires of a valid request beyond the OpenAPI schema (its validators), as
// refinements of the schema-built arbitraries. Each one is a documented rule, cited where it lives.
import fc from 'fast-check';
import { INT32_MAX, INT64_MAX, nonEmptyArray, oneOfExcept, type Refinements } from './openapi-arbitrary.js';

const word = fc.stringMatching(/^[A-Za-z][A-Za-z0-9_]{0,7}$/);
const packageId = fc.stringMatching(/^[0-9a-f]{64}$/);

/** A template id as Canton's IdentifierConverter splits it: package-id or #package-name form. */
export const templateId = fc
  .tuple(
    fc.oneof(
      packageId,
      word.map((name) => `#${name}`),
    ),
    fc.array(word, { minLength: 1, maxLength: 3 }).map((parts) => parts.join('.')),
    word,
  )
  .map(([pkg, module, entity]) => `${pkg}:${module}:${entity}`);

const nonEmptyText = fc.string({ minLength: 1, maxLength: 12, unit: 'grapheme' });

/** EventFormat: filtersByParty and filtersForAnyParty may not both be empty (FormatValidator). */
const eventFormat: Refinements[string] = (generic) =>
  fc
    .tuple(
      generic(),
      fc.constantFrom('byParty', 'anyParty', 'both'),
      fc.dictionary(word, fc.constant({ cumulative: [] }), { minKeys: 1, maxKeys: 2 }),
    )
    .map(([format, which, byParty]) => {
      const result = { ...(format as Record<string, unknown>) };
      if (
        which !== 'anyParty' &&
        (result.filtersByParty === undefined || Object.keys(result.filtersByParty as object).length === 0)
      )
        result.filtersByParty = byParty;
      if (which !== 'byParty' && result.filtersForAnyParty === undefined) result.filtersForAnyParty = {};
      return result;
    });

const formats: Refinements = {
  'TransactionFormat.transactionShape': () =>
    fc.constantFrom('TRANSACTION_SHAPE_ACS_DELTA', 'TRANSACTION_SHAPE_LEDGER_EFFECTS'),
  EventFormat: eventFormat,
};

/** VettedPackagesRef.process: id; name; name+version; id+name+version (empty = unset). */
const vettedPackagesRef = fc.oneof(
  fc.record(
    { packageId, packageName: fc.constant(''), packageVersion: fc.constant('') },
    { requiredKeys: ['packageId'] },
  ),
  fc.record({ packageName: word }),
  fc.record({ packageName: word, packageVersion: fc.stringMatching(/^\d{1,2}(\.\d{1,2}){0,2}$/) }),
  fc.record({ packageId, packageName: word, packageVersion: fc.stringMatching(/^\d{1,2}(\.\d{1,2}){0,2}$/) }),
);

const packages = fc.array(vettedPackagesRef, { minLength: 1, maxLength: 3 });
/** A Vet/Unvet payload with its packages (optional in the 3.4 spec, required since 3.5). */
const withPackages: Refinements[string] = (generic) =>
  fc.tuple(generic(), packages).map(([value, refs]) => ({ ...(value as object), packages: refs }));

export const vettingRefinements: Refinements = {
  'UpdateVettedPackagesRequest.changes': (_generic, build, schema) => nonEmptyArray(schema, build),
  // `operation` is optional in the schema; absent it is Empty, which Canton refuses.
  VettedPackagesChange: (generic, build, schema) =>
    fc
      .tuple(generic(), build(schema.properties!.operation!))
      .map(([change, operation]) => ({ ...(change as object), operation })),
  Operation: (_generic, build, schema) => oneOfExcept(schema, build, ['Empty']),
  Vet1: withPackages,
  Unvet1: withPackages,
  'Prior.value': () => fc.oneof(fc.integer({ min: 1, max: INT32_MAX }), fc.constant(INT32_MAX)),
};

export const updateByOffsetRefinements: Refinements = {
  ...formats,
  'GetUpdateByOffsetRequest.offset': () => fc.oneof(fc.bigInt(1n, INT64_MAX), fc.constant(INT64_MAX), fc.constant(1n)),
};

const idpPath = fc.constantFrom('is_deactivated', 'issuer', 'jwks_url', 'audience', 'identity_provider_id');

export const idpRefinements: Refinements = {
  'IdentityProviderConfig.identityProviderId': () => nonEmptyText,
  // A malformed jwksUrl is the participant's to refuse: any string passes the rule.
  'IdentityProviderConfig.jwksUrl': () => fc.oneof(fc.constant(''), fc.webUrl(), fc.string()),
  // The spec marks `paths` optional, but an empty mask is refused ("The update mask contains no entries").
  FieldMask: (generic) =>
    fc
      .tuple(generic(), fc.uniqueArray(idpPath, { minLength: 1, maxLength: 5 }))
      .map(([mask, paths]) => ({ ...(mask as object), paths })),
};

export const submitRefinements: Refinements = {
  ...formats,
  'JsCommands.commands': (_generic, build, schema) => nonEmptyArray(schema, build),
  'JsCommands.actAs': () => fc.array(word, { minLength: 1, maxLength: 2 }),
  'JsCommands.commandId': () => nonEmptyText,
  'CreateCommand.templateId': () => templateId,
  'ExerciseCommand.templateId': () => templateId,
  'ExerciseCommand.contractId': () => nonEmptyText,
  'ExerciseCommand.choice': () => word,
  'CreateAndExerciseCommand.templateId': () => templateId,
  'CreateAndExerciseCommand.choice': () => word,
  'ExerciseByKeyCommand.templateId': () => templateId,
  'ExerciseByKeyCommand.choice': () => word,
};
