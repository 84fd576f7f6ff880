// TransactionFormat, EventFormat and UpdateFormat, shared by getUpdateByOffset and
// submitAndWaitForTransaction: first what the JSON decoder refuses (types, enum names), then
// Canton's FormatValidator in its order (`FormatValidator.scala`).
import {
  decodeFailure,
  field,
  invalidArgument,
  isAbsent,
  isObject,
  join,
  missingField,
  optionalOfType,
  optionalStringArray,
  variantKeys,
  wrongType,
  type JsonObject,
  type Violation,
} from '../violation.js';

export const TRANSACTION_SHAPES = [
  'TRANSACTION_SHAPE_UNSPECIFIED',
  'TRANSACTION_SHAPE_ACS_DELTA',
  'TRANSACTION_SHAPE_LEDGER_EFFECTS',
] as const;
const IDENTIFIER_FILTERS = ['Empty', 'InterfaceFilter', 'TemplateFilter', 'WildcardFilter'] as const;

/**
 * Canton's enum decoder (`JsSchema.stringDecoderForEnum`: ScalaPB's `fromName`, which knows the
 * declared names only, not "UNRECOGNIZED").
 */
export function enumProblem(value: unknown, path: string, names: readonly string[]): Violation | undefined {
  if (typeof value !== 'string') return wrongType(path, 'a string', value);
  if (names.includes(value)) return undefined;
  return decodeFailure(`Unrecognized enum value ${value}. Supported values: [${names.join(', ')}]`, path);
}

function decodeFilters(value: unknown, path: string): Violation | undefined {
  if (!isObject(value)) return wrongType(path, 'an object', value);
  const cumulative = field(value, 'cumulative');
  if (isAbsent(cumulative)) return undefined;
  if (!Array.isArray(cumulative)) return wrongType(join(path, 'cumulative'), 'an array', cumulative);
  for (const [index, entry] of cumulative.entries()) {
    const entryPath = join(join(path, 'cumulative'), index);
    if (!isObject(entry)) return wrongType(entryPath, 'an object', entry);
    const identifierFilter = field(entry, 'identifierFilter');
    if (isAbsent(identifierFilter)) continue; // relaxed decoding: Empty
    const filterPath = join(entryPath, 'identifierFilter');
    if (!isObject(identifierFilter)) return wrongType(filterPath, 'an object', identifierFilter);
    if (variantKeys(identifierFilter, IDENTIFIER_FILTERS).length === 0) {
      return decodeFailure(`expected one of ${IDENTIFIER_FILTERS.join(', ')}`, filterPath);
    }
  }
  return undefined;
}

/** What the JSON decoder refuses in an EventFormat. */
export function decodeEventFormat(value: unknown, path: string): Violation | undefined {
  if (!isObject(value)) return wrongType(path, 'an object', value);
  const byParty = field(value, 'filtersByParty');
  if (!isAbsent(byParty)) {
    if (!isObject(byParty)) return wrongType(join(path, 'filtersByParty'), 'an object (party -> Filters)', byParty);
    for (const party of Object.keys(byParty)) {
      const problem = decodeFilters(byParty[party], `${join(path, 'filtersByParty')}[${JSON.stringify(party)}]`);
      if (problem !== undefined) return problem;
    }
  }
  const anyParty = field(value, 'filtersForAnyParty');
  if (!isAbsent(anyParty)) {
    const problem = decodeFilters(anyParty, join(path, 'filtersForAnyParty'));
    if (problem !== undefined) return problem;
  }
  return optionalOfType(value, 'verbose', path, 'boolean');
}

/** What the JSON decoder refuses in a TransactionFormat. */
export function decodeTransactionFormat(value: unknown, path: string): Violation | undefined {
  if (!isObject(value)) return wrongType(path, 'an object', value);
  const shape = field(value, 'transactionShape');
  if (!isAbsent(shape)) {
    const problem = enumProblem(shape, join(path, 'transactionShape'), TRANSACTION_SHAPES);
    if (problem !== undefined) return problem;
  }
  const eventFormat = field(value, 'eventFormat');
  return isAbsent(eventFormat) ? undefined : decodeEventFormat(eventFormat, join(path, 'eventFormat'));
}

/** What the JSON decoder refuses in an UpdateFormat. */
export function decodeUpdateFormat(value: unknown, path: string): Violation | undefined {
  if (!isObject(value)) return wrongType(path, 'an object', value);
  const transactions = field(value, 'includeTransactions');
  if (!isAbsent(transactions)) {
    const problem = decodeTransactionFormat(transactions, join(path, 'includeTransactions'));
    if (problem !== undefined) return problem;
  }
  const reassignments = field(value, 'includeReassignments');
  if (!isAbsent(reassignments)) {
    const problem = decodeEventFormat(reassignments, join(path, 'includeReassignments'));
    if (problem !== undefined) return problem;
  }
  const topology = field(value, 'includeTopologyEvents');
  if (isAbsent(topology)) return undefined;
  const topologyPath = join(path, 'includeTopologyEvents');
  if (!isObject(topology)) return wrongType(topologyPath, 'an object', topology);
  const authorization = field(topology, 'includeParticipantAuthorizationEvents');
  if (isAbsent(authorization)) return undefined;
  const authorizationPath = join(topologyPath, 'includeParticipantAuthorizationEvents');
  if (!isObject(authorization)) return wrongType(authorizationPath, 'an object', authorization);
  return optionalStringArray(authorization, 'parties', authorizationPath);
}

// Canton's FormatValidator, on a body the decoder accepted.

function isEmptyMap(value: unknown): boolean {
  return isAbsent(value) || (isObject(value) && Object.keys(value).length === 0);
}

/** FormatValidator.validate(EventFormat): one of the two filters must be given. */
export function validateEventFormat(eventFormat: JsonObject): Violation | undefined {
  if (isEmptyMap(field(eventFormat, 'filtersByParty')) && isAbsent(field(eventFormat, 'filtersForAnyParty'))) {
    return invalidArgument('filtersByParty and filtersForAnyParty cannot be empty simultaneously');
  }
  return undefined;
}

/** FormatValidator.validate(TransactionFormat): the shape, then the event format. */
export function validateTransactionFormat(transactionFormat: JsonObject): Violation | undefined {
  const shape = field(transactionFormat, 'transactionShape');
  // Absent: the relaxed decoder fills in an unrecognized enum the participant cannot decode; either
  // way the request is refused, and the missing shape is the clearest way to say so.
  if (isAbsent(shape) || shape === 'TRANSACTION_SHAPE_UNSPECIFIED') return missingField('transaction_shape');
  const eventFormat = field(transactionFormat, 'eventFormat');
  if (!isObject(eventFormat)) return missingField('event_format');
  return validateEventFormat(eventFormat);
}

/** FormatValidator.validate(UpdateFormat): transactions, reassignments, topology, in that order. */
export function validateUpdateFormat(updateFormat: JsonObject): Violation | undefined {
  const transactions = field(updateFormat, 'includeTransactions');
  if (isObject(transactions)) {
    const problem = validateTransactionFormat(transactions);
    if (problem !== undefined) return problem;
  }
  const reassignments = field(updateFormat, 'includeReassignments');
  if (isObject(reassignments)) return validateEventFormat(reassignments);
  return undefined;
}
