// What a prepared transaction will do, read with Canton's own protobuf definitions as published in
// @canton-network/core-ledger-proto (interactive_submission_service.proto PreparedTransaction,
// transaction/v1/interactive_submission_data.proto Node): its root nodes as commands (template,
// choice, contract, arguments) and its submitters (Metadata.submitter_info.act_as), so that the rules
// an `execute` is held to are the rules its `prepare` would have been. Pure and synchronous; loading
// the bindings loads every message of the Ledger API, so only the pool's worker (prepared-worker.ts)
// and the policy commands import this file, never the event loop.
import {
  PreparedTransaction,
  type DamlTransaction_Node,
  type Identifier,
  type Value,
} from '@canton-network/core-ledger-proto';
import { damlValueToJson, DamlValueError } from '../proto/daml-value.js';
import type { CommandFacts, TemplateRef } from './document.js';
import {
  DEFAULT_PREPARED_LIMITS,
  PreparedTransactionError,
  type PreparedLimits,
  type PreparedSummary,
} from './prepared-summary.js';

/** interactive_submission_data.proto's Node, which the package's index does not name. */
type Node = Extract<DamlTransaction_Node['versionedNode'], { oneofKind: 'v1' }>['v1'];

function templateOf(identifier: Identifier | undefined, packageName: string): TemplateRef | undefined {
  if (identifier === undefined || identifier.packageId === '') return undefined;
  return {
    templateId: `${identifier.packageId}:${identifier.moduleName}:${identifier.entityName}`,
    packageId: identifier.packageId,
    packageName,
    moduleName: identifier.moduleName,
    entityName: identifier.entityName,
  };
}

/** A Daml value in the JSON API's encoding; one nested too deep or out of range makes the transaction unreadable. */
function valueToJson(value: Value | undefined, limits: PreparedLimits): unknown {
  if (!limits.withArguments) return null;
  try {
    return damlValueToJson(value, limits.maxValueDepth);
  } catch (error) {
    if (error instanceof DamlValueError || error instanceof RangeError)
      throw new PreparedTransactionError(error.message);
    throw error;
  }
}

const COMMAND_DEFAULTS = { createArguments: null, choiceArgument: null, contractKey: null, source: '', target: '' };

function nodeCommand(node: Node, limits: PreparedLimits): CommandFacts | undefined {
  const type = node.nodeType;
  switch (type.oneofKind) {
    case 'create':
      return {
        ...COMMAND_DEFAULTS,
        kind: 'CreateCommand',
        template: templateOf(type.create.templateId, type.create.packageName),
        choice: '',
        contractId: type.create.contractId,
        createArguments: valueToJson(type.create.argument, limits),
      };
    case 'exercise':
      return {
        ...COMMAND_DEFAULTS,
        kind: 'ExerciseCommand',
        template: templateOf(type.exercise.templateId, type.exercise.packageName),
        choice: type.exercise.choiceId,
        contractId: type.exercise.contractId,
        choiceArgument: valueToJson(type.exercise.chosenValue, limits),
      };
    case 'fetch':
      return {
        ...COMMAND_DEFAULTS,
        kind: 'FetchNode',
        template: templateOf(type.fetch.templateId, type.fetch.packageName),
        choice: '',
        contractId: type.fetch.contractId,
      };
    default:
      return undefined;
  }
}

/** The root nodes' commands; a rollback root stands for its children (their choices still run). */
function rootCommands(
  roots: readonly string[],
  nodes: ReadonlyMap<string, DamlTransaction_Node>,
  limits: PreparedLimits,
): { commands: CommandFacts[]; unreadable: number } {
  const commands: CommandFacts[] = [];
  let unreadable = 0;
  const pending = [...roots].reverse();
  const seen = new Set<string>();
  while (pending.length > 0) {
    const id = pending.pop()!;
    if (seen.has(id)) continue; // a cycle of rollbacks would never end
    seen.add(id);
    const versioned = nodes.get(id)?.versionedNode;
    const node = versioned?.oneofKind === 'v1' ? versioned.v1 : undefined;
    if (node?.nodeType.oneofKind === 'rollback') {
      pending.push(...[...node.nodeType.rollback.children].reverse());
      continue;
    }
    const command = node === undefined ? undefined : nodeCommand(node, limits);
    if (command === undefined) unreadable++;
    else commands.push(command);
    if (commands.length + unreadable > limits.maxRoots)
      throw new PreparedTransactionError(`more than ${limits.maxRoots} root nodes`);
  }
  return { commands, unreadable };
}

/** Decodes a PreparedTransaction's bytes; throws PreparedTransactionError when they are not one. */
export function summarizePreparedTransaction(
  bytes: Uint8Array,
  limits: PreparedLimits = DEFAULT_PREPARED_LIMITS,
): PreparedSummary {
  let prepared: PreparedTransaction;
  try {
    // protobuf-ts has no recursion limit: a value nested past the stack's depth throws a RangeError
    // (caught here, in the worker); one nested past maxValueDepth is refused when read (damlValueToJson).
    prepared = PreparedTransaction.fromBinary(bytes, { readUnknownField: false });
  } catch (error) {
    throw new PreparedTransactionError(`not a PreparedTransaction: ${(error as Error).message}`);
  }
  const transaction = prepared.transaction;
  if (transaction === undefined || transaction.roots.length === 0)
    throw new PreparedTransactionError('no transaction, or a transaction without roots');
  const nodes = new Map(transaction.nodes.map((node) => [node.nodeId, node]));
  const { commands, unreadable } = rootCommands(transaction.roots, nodes, limits);
  const submitter = prepared.metadata?.submitterInfo;
  return {
    commands,
    actAs: submitter?.actAs ?? [],
    commandId: submitter?.commandId ?? '',
    synchronizerId: prepared.metadata?.synchronizerId ?? '',
    unreadable,
  };
}
