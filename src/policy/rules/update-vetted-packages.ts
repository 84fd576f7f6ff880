// POST /v2/package-vetting and POST /v2/package-vetting/update (Canton
// `UpdateVettedPackagesOpts.fromProto`, `VettedPackagesChange.fromProto`, `VettedPackagesRef.process`,
// `PriorTopologySerial.fromProto` in ledger-api-core `ledger/api/util.scala`).
//
// Two refusals are the gateway's own, deliberately stricter than the participant: an empty
// `changes` list and a Vet/Unvet with an empty `packages` list (no-op updates of the topology).
import { INT32_MAX, INT32_MIN, readInteger } from '../numbers.js';
import {
  decodeFailure,
  field,
  isAbsent,
  isObject,
  join,
  missingField,
  missingRequired,
  optionalOfType,
  protoDeserializationFailure,
  requestRule,
  oneofViolation,
  variantKeys,
  wrongType,
  type JsonObject,
  type RuleContext,
  type Violation,
} from '../violation.js';
import { enumProblem } from './formats.js';

export const FORCE_FLAGS = [
  'UPDATE_VETTED_PACKAGES_FORCE_FLAG_UNSPECIFIED',
  'UPDATE_VETTED_PACKAGES_FORCE_FLAG_ALLOW_VET_INCOMPATIBLE_UPGRADES',
  'UPDATE_VETTED_PACKAGES_FORCE_FLAG_ALLOW_UNVETTED_DEPENDENCIES',
] as const;
const OPERATIONS = ['Empty', 'Unvet', 'Vet'] as const;
const SERIALS = ['Empty', 'NoPrior', 'Prior'] as const;

/** Canton's VettedPackagesRef.process: the combinations of set (non-empty) fields it accepts. */
const REF_COMBINATIONS =
  'Either package_id must be set, or package_name and package_version must be set, or all three must be set.';

function decodeRef(ref: unknown, path: string): Violation | undefined {
  if (!isObject(ref)) return wrongType(path, 'an object', ref);
  return (
    optionalOfType(ref, 'packageId', path, 'string') ??
    optionalOfType(ref, 'packageName', path, 'string') ??
    optionalOfType(ref, 'packageVersion', path, 'string')
  );
}

function isSet(ref: JsonObject, name: string): boolean {
  const value = field(ref, name);
  return typeof value === 'string' && value !== '';
}

function validateRef(ref: JsonObject): Violation | undefined {
  const id = isSet(ref, 'packageId');
  const name = isSet(ref, 'packageName');
  const version = isSet(ref, 'packageVersion');
  const accepted = (id && name && version) || (!id && name) || (id && !name && !version);
  return accepted
    ? undefined
    : protoDeserializationFailure(`InvariantViolation(Some(package_name),${REF_COMBINATIONS})`);
}

/** The `{"value": {...}}` payload of a Vet or Unvet variant, as the decoder reads it. */
function decodeChangeVariant(variant: 'Vet' | 'Unvet', payload: unknown, path: string): Violation | undefined {
  if (!isObject(payload)) return wrongType(path, 'an object', payload);
  const value = field(payload, 'value');
  const valuePath = join(path, 'value');
  if (value === undefined) return missingRequired(valuePath);
  if (!isObject(value)) return wrongType(valuePath, 'an object', value);
  const packages = field(value, 'packages');
  if (!isAbsent(packages)) {
    if (!Array.isArray(packages)) return wrongType(join(valuePath, 'packages'), 'an array', packages);
    for (const [index, ref] of packages.entries()) {
      const problem = decodeRef(ref, join(join(valuePath, 'packages'), index));
      if (problem !== undefined) return problem;
    }
  }
  if (variant === 'Vet') {
    return (
      optionalOfType(value, 'newValidFromInclusive', valuePath, 'string') ??
      optionalOfType(value, 'newValidUntilExclusive', valuePath, 'string')
    );
  }
  return undefined;
}

function validateChangeVariant(
  variant: 'Empty' | 'Vet' | 'Unvet',
  payload: unknown,
  index: number,
): Violation | undefined {
  if (variant === 'Empty') return protoDeserializationFailure('FieldNotSet(operation)');
  const value = field(payload as JsonObject, 'value') as JsonObject;
  const packages = field(value, 'packages');
  if (!Array.isArray(packages) || packages.length === 0) return missingField(`changes[${index}].packages`);
  for (const ref of packages) {
    const problem = validateRef(ref as JsonObject);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

/**
 * One change's operation: the decoder picks one of the variant keys present; the change is accepted
 * when any variant present would be (Canton's OpenAPI encodes a oneof as `{"Variant": {...}}`).
 */
function checkChange(change: unknown, index: number, phase: 'decode' | 'validate'): Violation | undefined {
  const path = `changes[${index}]`;
  if (!isObject(change)) return wrongType(path, 'an object', change);
  const operation = field(change, 'operation');
  if (operation === undefined)
    return phase === 'validate' ? protoDeserializationFailure('FieldNotSet(operation)') : undefined;
  const operationPath = join(path, 'operation');
  if (!isObject(operation)) return wrongType(operationPath, 'an object', operation);
  const present = variantKeys(operation, OPERATIONS);
  if (present.length === 0) return decodeFailure(`expected one of ${OPERATIONS.join(', ')}`, operationPath);
  const decodable = present.filter(
    (variant) =>
      variant === 'Empty' ||
      decodeChangeVariant(variant, operation[variant], join(operationPath, variant)) === undefined,
  );
  if (phase === 'decode') {
    return decodable.length > 0
      ? undefined
      : decodeChangeVariant(present[0] as 'Vet' | 'Unvet', operation[present[0]!], join(operationPath, present[0]!));
  }
  return oneofViolation(decodable, (variant) => validateChangeVariant(variant, operation[variant], index));
}

/** expectedTopologySerial.serial: Empty (no check), NoPrior, or Prior with an int32 > 0. */
function checkSerial(body: JsonObject, context: RuleContext, phase: 'decode' | 'validate'): Violation | undefined {
  const expected = field(body, 'expectedTopologySerial');
  if (isAbsent(expected)) return undefined;
  if (!isObject(expected)) return wrongType('expectedTopologySerial', 'an object', expected);
  const serial = field(expected, 'serial');
  if (isAbsent(serial)) return undefined;
  const serialPath = 'expectedTopologySerial.serial';
  if (!isObject(serial)) return wrongType(serialPath, 'an object', serial);
  const present = variantKeys(serial, SERIALS);
  if (present.length === 0) return decodeFailure(`expected one of ${SERIALS.join(', ')}`, serialPath);
  return oneofViolation(present, (variant) => checkSerialVariant(serial, variant, context, phase));
}

/** One variant of expectedTopologySerial.serial: Empty and NoPrior pass; Prior's value an int32, above 0 to validate. */
function checkSerialVariant(
  serial: JsonObject,
  variant: (typeof SERIALS)[number],
  context: RuleContext,
  phase: 'decode' | 'validate',
): Violation | undefined {
  if (variant !== 'Prior') return undefined;
  const serialPath = 'expectedTopologySerial.serial';
  const prior = serial.Prior;
  if (!isObject(prior)) return wrongType(`${serialPath}.Prior`, 'an object', prior);
  const raw = field(prior, 'value');
  const reading =
    raw === undefined
      ? { ok: true as const, value: 0n }
      : readInteger(raw, context.numberText(`${serialPath}.Prior.value`), INT32_MIN, INT32_MAX);
  if (!reading.ok) return decodeFailure(`${reading.reason}; expected an integer (int32)`, `${serialPath}.Prior.value`);
  if (phase === 'validate' && reading.value <= 0n) {
    return protoDeserializationFailure(
      `expected_topology_serial: the prior topology serial must be a positive integer, got ${reading.value}`,
    );
  }
  return undefined;
}

const EXACT_NUMBERS = ['expectedTopologySerial.serial.Prior.value'];

export const updateVettedPackagesRule = requestRule(EXACT_NUMBERS, (body, context): Violation | undefined => {
  if (!isObject(body)) return wrongType('', 'an object', body);

  // What the JSON decoder refuses.
  const changes = field(body, 'changes');
  if (!isAbsent(changes) && !Array.isArray(changes)) return wrongType('changes', 'an array', changes);
  const changeList: unknown[] = Array.isArray(changes) ? changes : [];
  for (const [index, change] of changeList.entries()) {
    const problem = checkChange(change, index, 'decode');
    if (problem !== undefined) return problem;
  }
  const typeProblem =
    optionalOfType(body, 'dryRun', '', 'boolean') ??
    optionalOfType(body, 'synchronizerId', '', 'string') ??
    checkSerial(body, context, 'decode');
  if (typeProblem !== undefined) return typeProblem;
  const flags = field(body, 'updateVettedPackagesForceFlags');
  if (!isAbsent(flags)) {
    if (!Array.isArray(flags)) return wrongType('updateVettedPackagesForceFlags', 'an array', flags);
    for (const [index, flag] of flags.entries()) {
      const problem = enumProblem(flag, `updateVettedPackagesForceFlags[${index}]`, FORCE_FLAGS);
      if (problem !== undefined) return problem;
    }
  }

  // Canton's fromProto, in its order (changes, then the serial); the empty list is ours.
  if (changeList.length === 0) return missingField('changes');
  for (const [index, change] of changeList.entries()) {
    const problem = checkChange(change, index, 'validate');
    if (problem !== undefined) return problem;
  }
  return checkSerial(body, context, 'validate');
});
