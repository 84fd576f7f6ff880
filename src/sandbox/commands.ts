// Command submission: POST /v2/commands/submit-and-wait-for-transaction and /v2/commands/submit-and-wait
// (Canton `JsCommandService.scala`). JsCommands decodes strictly (missing commands/commandId/actAs -> 400 text/plain),
// then Canton's CommandsValidator checks run (MISSING_FIELD ...), then the commands are "interpreted".
//
// Sandbox simplifications: createArguments are not type-checked against Daml packages, a template id
// need not name a known package, signatories are the actAs parties, observers are the party ids found
// among the top-level createArguments values, and EVERY choice is consuming (so exercising archives
// the contract; ACS_DELTA shows an ArchivedEvent, LEDGER_EFFECTS an ExercisedEvent with consuming=true).

import { setTimeout as delay } from 'node:timers/promises';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { userIdFromAuthorization } from './bearer.js';
import {
  bodyObject,
  DecodeFailure,
  fieldPath,
  optionalObject,
  relaxedString,
  relaxedStringArray,
  requiredField,
} from './decode.js';
import { freshSpanId, missingField, SandboxError } from './errors.js';
import { jsonBodyOf, traceIdOf } from './http-conventions.js';
import { isJsonObject, type Json, type JsonObject } from './json.js';
import { contractIdAt, SANDBOX_SEED, updateIdAt } from './seed.js';
import {
  commitTransaction,
  type ContractRecord,
  type LedgerNode,
  type SandboxState,
  type StoredTransaction,
} from './state.js';
import {
  defaultTransactionFormat,
  parseTransactionFormat,
  renderTransaction,
  requireIdentifier,
  type TransactionFormat,
} from './transactions.js';

const PARTY_ID = /^[A-Za-z0-9_.-]+::1220[0-9a-f]{64}$/;

export type Command =
  | { kind: 'create'; templateId: string; createArguments: Json }
  | { kind: 'exercise'; templateId: string; contractId: string; choice: string; choiceArgument: Json }
  | { kind: 'createAndExercise'; templateId: string; createArguments: Json; choice: string; choiceArgument: Json }
  | { kind: 'exerciseByKey'; templateId: string };

export interface Submission {
  readonly userId: string;
  readonly commandId: string;
  readonly workflowId: string;
  readonly actAs: readonly string[];
  readonly readAs: readonly string[];
  readonly synchronizerId: string;
  readonly commands: readonly Command[];
}

function strictString(object: JsonObject, key: string, path: string): string {
  const value = requiredField(object, key, path);
  if (typeof value !== 'string')
    throw new DecodeFailure(`Got value with wrong type, expecting string at '${fieldPath(path, key)}'`);
  return value;
}

function strictStringArray(object: JsonObject, key: string, path: string): string[] {
  requiredField(object, key, path);
  return relaxedStringArray(object, key, path);
}

function parseCommand(command: Json, path: string): Command {
  if (!isJsonObject(command)) throw new DecodeFailure(`Got value with wrong type, expecting object at '${path}'`);
  const [variant, ...extra] = Object.keys(command);
  const payload = variant === undefined ? undefined : command[variant];
  if (variant === undefined || extra.length > 0 || !isJsonObject(payload))
    throw new DecodeFailure(`Expected a single command variant at '${path}'`);
  const variantPath = fieldPath(path, variant);
  const templateId = requireIdentifier(
    strictString(payload, 'templateId', variantPath),
    fieldPath(variantPath, 'templateId'),
  );
  switch (variant) {
    case 'CreateCommand':
      return { kind: 'create', templateId, createArguments: requiredField(payload, 'createArguments', variantPath) };
    case 'ExerciseCommand':
      return {
        kind: 'exercise',
        templateId,
        contractId: strictString(payload, 'contractId', variantPath),
        choice: strictString(payload, 'choice', variantPath),
        choiceArgument: requiredField(payload, 'choiceArgument', variantPath),
      };
    case 'CreateAndExerciseCommand':
      return {
        kind: 'createAndExercise',
        templateId,
        createArguments: requiredField(payload, 'createArguments', variantPath),
        choice: strictString(payload, 'choice', variantPath),
        choiceArgument: requiredField(payload, 'choiceArgument', variantPath),
      };
    case 'ExerciseByKeyCommand':
      return { kind: 'exerciseByKey', templateId };
    default:
      throw new DecodeFailure(`Unknown command ${variant} at '${path}'`);
  }
}

/** Strict JsCommands decoding, then CommandsValidator's checks in its order. */
export function parseSubmission(jsCommands: JsonObject, path: string, tokenUserId: string | undefined): Submission {
  const commandsJson = requiredField(jsCommands, 'commands', path);
  if (!Array.isArray(commandsJson))
    throw new DecodeFailure(`Got value with wrong type, expecting array at '${fieldPath(path, 'commands')}'`);
  const commandId = strictString(jsCommands, 'commandId', path);
  const actAs = strictStringArray(jsCommands, 'actAs', path);
  const commands = commandsJson.map((command, index) =>
    parseCommand(command, fieldPath(fieldPath(path, 'commands'), index)),
  );
  const submission: Submission = {
    userId: relaxedString(jsCommands, 'userId', path) || (tokenUserId ?? ''),
    commandId,
    workflowId: relaxedString(jsCommands, 'workflowId', path),
    actAs,
    readAs: relaxedStringArray(jsCommands, 'readAs', path),
    synchronizerId: relaxedString(jsCommands, 'synchronizerId', path),
    commands,
  };
  if (submission.userId === '') throw missingField('user_id');
  if (commandId === '') throw missingField('command_id');
  if (commands.length === 0) throw missingField('commands');
  for (const command of commands) {
    if (command.kind === 'exercise' && command.contractId === '') throw missingField('contract_id');
    if ((command.kind === 'exercise' || command.kind === 'createAndExercise') && command.choice === '')
      throw missingField('choice');
  }
  if (actAs.length === 0) throw missingField('party or act_as');
  return submission;
}

function compareVersions(a: string, b: string): number {
  const left = a.split('.').map(Number);
  const right = b.split('.').map(Number);
  for (let i = 0; i < Math.max(left.length, right.length); i++) {
    const difference = (left[i] ?? 0) - (right[i] ?? 0);
    if (difference !== 0) return difference;
  }
  return 0;
}

/** Resolve `#package-name:M:E` to the newest known package of that name; keep unknown ids as given. */
function resolveTemplate(
  state: SandboxState,
  templateId: string,
): Pick<ContractRecord, 'templateId' | 'packageName' | 'representativePackageId'> {
  const [packageRef = '', module, entity] = templateId.split(':');
  if (packageRef.startsWith('#')) {
    const packageName = packageRef.slice(1);
    const newest = [...state.packages.values()]
      .filter((pkg) => pkg.packageName === packageName)
      .sort((a, b) => compareVersions(b.packageVersion, a.packageVersion))[0];
    if (newest === undefined) return { templateId, packageName, representativePackageId: '' };
    return {
      templateId: `${newest.packageId}:${module}:${entity}`,
      packageName,
      representativePackageId: newest.packageId,
    };
  }
  const pkg = state.packages.get(packageRef);
  return { templateId, packageName: pkg?.packageName ?? packageRef, representativePackageId: packageRef };
}

function partiesIn(createArguments: Json): string[] {
  if (!isJsonObject(createArguments)) return [];
  const values = Object.values(createArguments).flatMap((value) => (Array.isArray(value) ? value : [value]));
  return values.filter((value): value is string => typeof value === 'string' && PARTY_ID.test(value));
}

function newContract(
  state: SandboxState,
  submission: Submission,
  templateId: string,
  createArguments: Json,
  contractId: string,
  createdAt: string,
): ContractRecord {
  const signatories = [...new Set(submission.actAs)];
  const observers = [...new Set(partiesIn(createArguments))].filter((party) => !signatories.includes(party));
  return {
    contractId,
    ...resolveTemplate(state, templateId),
    createArgument: createArguments,
    signatories,
    observers,
    createdAt,
  };
}

function contractNotFound(contractId: string): SandboxError {
  return new SandboxError('CONTRACT_NOT_FOUND', `Contract could not be found with id ${contractId}`, {
    resources: [['CID', contractId]],
  });
}

/** The ledger-effects nodes of a submission at `offset`; throws before anything is committed. */
export function interpret(state: SandboxState, submission: Submission, offset: number, now: string): LedgerNode[] {
  const nodes: LedgerNode[] = [];
  const archivedHere = new Set<string>();
  const exercise = (
    contract: ContractRecord,
    templateId: string,
    choice: string,
    choiceArgument: Json,
    createdInSameTransaction: boolean,
  ): void => {
    archivedHere.add(contract.contractId);
    nodes.push({
      kind: 'exercise',
      nodeId: nodes.length,
      contract,
      templateId: resolveTemplate(state, templateId).templateId,
      choice,
      choiceArgument,
      actingParties: [...submission.actAs],
      consuming: true,
      exerciseResult: {},
      createdInSameTransaction,
    });
  };
  for (const command of submission.commands) {
    switch (command.kind) {
      case 'create': {
        const nodeId = nodes.length;
        const contract = newContract(
          state,
          submission,
          command.templateId,
          command.createArguments,
          contractIdAt(offset, nodeId),
          now,
        );
        nodes.push({ kind: 'create', nodeId, contract, consumedInSameTransaction: false });
        break;
      }
      case 'exercise': {
        const contract = state.activeContracts.get(command.contractId);
        if (contract === undefined || archivedHere.has(command.contractId)) throw contractNotFound(command.contractId);
        exercise(contract, command.templateId, command.choice, command.choiceArgument, false);
        break;
      }
      case 'createAndExercise': {
        const nodeId = nodes.length;
        const contract = newContract(
          state,
          submission,
          command.templateId,
          command.createArguments,
          contractIdAt(offset, nodeId),
          now,
        );
        nodes.push({ kind: 'create', nodeId, contract, consumedInSameTransaction: true });
        exercise(contract, command.templateId, command.choice, command.choiceArgument, true);
        break;
      }
      case 'exerciseByKey':
        // The seeded templates declare no contract key.
        throw new SandboxError(
          'COMMAND_PREPROCESSING_FAILED',
          `Template ${command.templateId} does not have a contract key`,
        );
    }
  }
  return nodes;
}

export interface SubmissionTrace {
  readonly traceId: string;
  readonly traceparent: string | undefined;
  readonly tracestate: string | undefined;
}

/** Interpret and commit atomically (no await between the two). */
export function executeSubmission(
  state: SandboxState,
  submission: Submission,
  trace: SubmissionTrace,
): StoredTransaction {
  const now = new Date().toISOString();
  const offset = state.ledgerEnd + 1;
  const nodes = interpret(state, submission, offset, now);
  return commitTransaction(state, (assignedOffset) => ({
    updateId: updateIdAt(assignedOffset),
    commandId: submission.commandId,
    workflowId: submission.workflowId,
    submitters: submission.actAs,
    synchronizerId: submission.synchronizerId || SANDBOX_SEED.synchronizers.global.synchronizerId,
    effectiveAt: now,
    recordTime: now,
    // Canton propagates the caller's W3C trace into the transaction (Canton `JsonV2Tests`).
    traceContext: {
      traceparent: trace.traceparent ?? `00-${trace.traceId}-${freshSpanId()}-01`,
      tracestate: trace.tracestate ?? null,
    },
    nodes,
  }));
}

/** The transaction `seed: 'default'` starts with: Alice creates an Iou. */
export function commitSeedTransaction(state: SandboxState): StoredTransaction {
  const alice = SANDBOX_SEED.parties.alice;
  const submission: Submission = {
    userId: SANDBOX_SEED.users.alice.id,
    commandId: SANDBOX_SEED.initialTransaction.commandId,
    workflowId: '',
    actAs: [alice],
    readAs: [],
    synchronizerId: '',
    commands: [
      {
        kind: 'create',
        templateId: SANDBOX_SEED.templates.iou,
        createArguments: { issuer: alice, owner: alice, currency: 'USD', amount: '100.0000000000', observers: [] },
      },
    ],
  };
  return executeSubmission(state, submission, {
    traceId: '0'.repeat(31) + '1',
    traceparent: undefined,
    tracestate: undefined,
  });
}

export function traceOf(request: FastifyRequest): SubmissionTrace {
  const traceId = traceIdOf(request);
  const incoming = request.headers.traceparent;
  const tracestate = request.headers.tracestate;
  return {
    traceId,
    traceparent: typeof incoming === 'string' && incoming.toLowerCase().includes(traceId) ? incoming : undefined,
    tracestate: typeof tracestate === 'string' ? tracestate : undefined,
  };
}

export interface CommandRouteOptions {
  /** Fixed latency added to every submission after validation, before it commits. */
  readonly submitDelayMs: number;
}

export function registerCommandRoutes(app: FastifyInstance, state: SandboxState, options: CommandRouteOptions): void {
  const tokenUser = (request: FastifyRequest): string | undefined =>
    userIdFromAuthorization(request.headers.authorization);
  const wait = async (): Promise<void> => {
    if (options.submitDelayMs > 0) await delay(options.submitDelayMs);
  };

  app.post('/v2/commands/submit-and-wait-for-transaction', async (request) => {
    const body = bodyObject(jsonBodyOf(request));
    const jsCommands = requiredField(body, 'commands', '');
    if (!isJsonObject(jsCommands)) throw new DecodeFailure("Got value with wrong type, expecting object at 'commands'");
    const submission = parseSubmission(jsCommands, 'commands', tokenUser(request));
    const formatJson = optionalObject(body, 'transactionFormat', '');
    const format: TransactionFormat =
      formatJson === undefined
        ? defaultTransactionFormat([...submission.actAs, ...submission.readAs])
        : parseTransactionFormat(formatJson, 'transactionFormat');
    await wait();
    const transaction = executeSubmission(state, submission, traceOf(request));
    return { transaction: renderTransaction(transaction, format).transaction };
  });

  app.post('/v2/commands/submit-and-wait', async (request) => {
    const submission = parseSubmission(bodyObject(jsonBodyOf(request)), '', tokenUser(request));
    await wait();
    const transaction = executeSubmission(state, submission, traceOf(request));
    return { updateId: transaction.updateId, completionOffset: transaction.offset };
  });
}
