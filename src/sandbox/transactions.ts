// TransactionFormat / EventFormat validation and JsTransaction rendering (Canton `FormatValidator.scala`).
// A stored transaction keeps its full ledger-effects tree; each read renders the shape and the
// party/template filter it asked for.

import {
  DecodeFailure,
  fieldPath,
  optionalObject,
  relaxedBoolean,
  relaxedObjectArray,
  relaxedOneof,
  relaxedString,
} from './decode.js';
import { invalidArgument, missingField } from './errors.js';
import type { JsonObject } from './json.js';
import { stakeholdersOf, type ContractRecord, type LedgerNode, type StoredTransaction } from './state.js';

export type TransactionShape = 'TRANSACTION_SHAPE_ACS_DELTA' | 'TRANSACTION_SHAPE_LEDGER_EFFECTS';

interface TemplateMatcher {
  readonly wildcard: boolean;
  readonly templateIds: readonly string[];
}

export interface EventFilter {
  readonly byParty: ReadonlyMap<string, TemplateMatcher>;
  readonly anyParty: TemplateMatcher | undefined;
}

export interface TransactionFormat {
  readonly shape: TransactionShape;
  readonly filter: EventFilter;
}

const WILDCARD: TemplateMatcher = { wildcard: true, templateIds: [] };

/**
 * `<package>:<module>:<entity>`, the package possibly `#<package-name>`; anything else fails JSON decoding
 * (Canton `JsonV2Tests`).
 */
export function requireIdentifier(value: string, path: string): string {
  const parts = value.split(':');
  if (parts.length !== 3 || parts.some((part) => part === '')) {
    throw new DecodeFailure(
      `Invalid identifier format (${value}) not matching the expected format (<package>:<moduleName>:<entityName>) at '${path}'`,
    );
  }
  return value;
}

function parseFilters(filters: JsonObject, path: string): TemplateMatcher {
  const cumulative = relaxedObjectArray(filters, 'cumulative', path);
  if (cumulative.length === 0) return WILDCARD;
  const templateIds: string[] = [];
  let wildcard = false;
  cumulative.forEach((entry, index) => {
    const entryPath = fieldPath(fieldPath(path, 'cumulative'), index);
    const identifierFilter = relaxedOneof(entry, 'identifierFilter', entryPath);
    if (identifierFilter === undefined || identifierFilter.variant === 'WildcardFilter') {
      wildcard = true;
      return;
    }
    if (identifierFilter.variant === 'TemplateFilter') {
      const value = optionalObject(identifierFilter.payload, 'value', identifierFilter.path) ?? {};
      templateIds.push(
        requireIdentifier(
          relaxedString(value, 'templateId', fieldPath(identifierFilter.path, 'value')),
          fieldPath(fieldPath(identifierFilter.path, 'value'), 'templateId'),
        ),
      );
    }
    // InterfaceFilter: the sandbox's templates implement no interfaces, so it matches nothing.
  });
  return { wildcard, templateIds };
}

/** EventFormat -> filter; both filter maps empty is INVALID_ARGUMENT (Canton `FormatValidator.scala`). */
export function parseEventFormat(eventFormat: JsonObject, path: string): EventFilter {
  const byPartyJson = optionalObject(eventFormat, 'filtersByParty', path) ?? {};
  const byParty = new Map<string, TemplateMatcher>();
  const byPartyPath = fieldPath(path, 'filtersByParty');
  for (const party of Object.keys(byPartyJson)) {
    const filters = optionalObject(byPartyJson, party, byPartyPath) ?? {};
    byParty.set(party, parseFilters(filters, fieldPath(byPartyPath, party)));
  }
  const anyPartyJson = optionalObject(eventFormat, 'filtersForAnyParty', path);
  const anyParty =
    anyPartyJson === undefined ? undefined : parseFilters(anyPartyJson, fieldPath(path, 'filtersForAnyParty'));
  relaxedBoolean(eventFormat, 'verbose', path);
  if (byParty.size === 0 && anyParty === undefined) {
    throw invalidArgument('filtersByParty and filtersForAnyParty cannot be empty simultaneously');
  }
  return { byParty, anyParty };
}

/** TransactionFormat: missing eventFormat -> MISSING_FIELD event_format; UNSPECIFIED shape -> MISSING_FIELD transaction_shape. */
export function parseTransactionFormat(transactionFormat: JsonObject, path: string): TransactionFormat {
  const eventFormat = optionalObject(transactionFormat, 'eventFormat', path);
  if (eventFormat === undefined) throw missingField('event_format');
  const filter = parseEventFormat(eventFormat, fieldPath(path, 'eventFormat'));
  const shape = relaxedString(transactionFormat, 'transactionShape', path);
  if (shape === '' || shape === 'TRANSACTION_SHAPE_UNSPECIFIED') throw missingField('transaction_shape');
  if (shape !== 'TRANSACTION_SHAPE_ACS_DELTA' && shape !== 'TRANSACTION_SHAPE_LEDGER_EFFECTS') {
    throw new DecodeFailure(`Unknown enum value ${shape} at '${fieldPath(path, 'transactionShape')}'`);
  }
  return { shape, filter };
}

/** What submit-and-wait-for-transaction uses without a transactionFormat: ACS delta, wildcard for actAs+readAs. */
export function defaultTransactionFormat(parties: readonly string[]): TransactionFormat {
  return {
    shape: 'TRANSACTION_SHAPE_ACS_DELTA',
    filter: { byParty: new Map(parties.map((party) => [party, WILDCARD])), anyParty: undefined },
  };
}

function templateMatches(matcher: TemplateMatcher, contract: ContractRecord): boolean {
  if (matcher.wildcard) return true;
  const [, module, entity] = contract.templateId.split(':');
  return matcher.templateIds.some((filterId) => {
    if (filterId === contract.templateId) return true;
    const [packageRef, filterModule, filterEntity] = filterId.split(':');
    return packageRef === `#${contract.packageName}` && filterModule === module && filterEntity === entity;
  });
}

/** The requesting parties that see an event with these informees (all informees for a for-any-party filter). */
function witnessesFor(filter: EventFilter, informees: ReadonlySet<string>, contract: ContractRecord): string[] {
  if (filter.anyParty !== undefined && templateMatches(filter.anyParty, contract)) return [...informees];
  const witnesses: string[] = [];
  for (const [party, matcher] of filter.byParty) {
    if (informees.has(party) && templateMatches(matcher, contract)) witnesses.push(party);
  }
  return witnesses;
}

function createdEvent(
  offset: number,
  nodeId: number,
  contract: ContractRecord,
  witnessParties: string[],
  acsDelta: boolean,
): JsonObject {
  return {
    CreatedEvent: {
      offset,
      nodeId,
      contractId: contract.contractId,
      templateId: contract.templateId,
      contractKey: null,
      createArgument: contract.createArgument,
      createdEventBlob: '',
      interfaceViews: [],
      witnessParties,
      signatories: [...contract.signatories],
      observers: [...contract.observers],
      createdAt: contract.createdAt,
      packageName: contract.packageName,
      representativePackageId: contract.representativePackageId,
      acsDelta,
    },
  };
}

function renderNode(offset: number, node: LedgerNode, format: TransactionFormat): JsonObject | undefined {
  const contract = node.contract;
  const stakeholders = stakeholdersOf(contract);
  if (format.shape === 'TRANSACTION_SHAPE_ACS_DELTA') {
    const witnesses = witnessesFor(format.filter, stakeholders, contract);
    if (witnesses.length === 0) return undefined;
    if (node.kind === 'create')
      return node.consumedInSameTransaction ? undefined : createdEvent(offset, node.nodeId, contract, witnesses, true);
    if (!node.consuming || node.createdInSameTransaction) return undefined;
    return {
      ArchivedEvent: {
        offset,
        nodeId: node.nodeId,
        contractId: contract.contractId,
        templateId: contract.templateId,
        witnessParties: witnesses,
        packageName: contract.packageName,
        implementedInterfaces: [],
      },
    };
  }
  if (node.kind === 'create') {
    const witnesses = witnessesFor(format.filter, stakeholders, contract);
    return witnesses.length === 0
      ? undefined
      : createdEvent(offset, node.nodeId, contract, witnesses, !node.consumedInSameTransaction);
  }
  const witnesses = witnessesFor(format.filter, new Set([...stakeholders, ...node.actingParties]), contract);
  if (witnesses.length === 0) return undefined;
  return {
    ExercisedEvent: {
      offset,
      nodeId: node.nodeId,
      contractId: contract.contractId,
      templateId: node.templateId,
      interfaceId: null,
      choice: node.choice,
      choiceArgument: node.choiceArgument,
      actingParties: [...node.actingParties],
      consuming: node.consuming,
      witnessParties: witnesses,
      lastDescendantNodeId: node.nodeId,
      exerciseResult: node.exerciseResult,
      packageName: contract.packageName,
      implementedInterfaces: [],
      acsDelta: node.consuming && !node.createdInSameTransaction,
    },
  };
}

function seesSubmission(filter: EventFilter, submitters: readonly string[]): boolean {
  return filter.anyParty !== undefined || submitters.some((party) => filter.byParty.has(party));
}

export interface RenderedTransaction {
  readonly transaction: JsonObject;
  readonly visibleEvents: number;
}

/** JsTransaction as this format sees it. The command id is only shown to the submitting parties. */
export function renderTransaction(transaction: StoredTransaction, format: TransactionFormat): RenderedTransaction {
  const events: JsonObject[] = [];
  for (const node of transaction.nodes) {
    const event = renderNode(transaction.offset, node, format);
    if (event !== undefined) events.push(event);
  }
  return {
    visibleEvents: events.length,
    transaction: {
      updateId: transaction.updateId,
      commandId: seesSubmission(format.filter, transaction.submitters) ? transaction.commandId : '',
      workflowId: transaction.workflowId,
      effectiveAt: transaction.effectiveAt,
      events,
      offset: transaction.offset,
      synchronizerId: transaction.synchronizerId,
      traceContext: {
        traceparent: transaction.traceContext.traceparent,
        tracestate: transaction.traceContext.tracestate,
      },
      recordTime: transaction.recordTime,
      externalTransactionHash: null,
      paidTrafficCost: 0,
    },
  };
}
