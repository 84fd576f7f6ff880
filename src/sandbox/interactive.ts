// Interactive submission (external signing): POST /v2/interactive-submission/prepare answers a
// PreparedTransaction in Canton's protobuf encoding (interactive_submission_service.proto, through the
// bindings of @canton-network/core-ledger-proto, loaded at the first such call: they hold every message
// of the Ledger API), and execute, executeAndWait and executeAndWaitForTransaction commit one (Canton
// `JsInteractiveSubmissionService.scala`).
//
// Sandbox simplifications: signatures are not verified (each actAs party must only have signed), the
// hash is the SHA-256 of the transaction's bytes (not Canton's hashing scheme), every node is a root,
// and execute interprets the transaction's commands again at the ledger end (contract ids are those of
// the offset it commits at, not those the prepared transaction named).
import { createHash, randomUUID } from 'node:crypto';
import type { DamlTransaction_Node, PreparedTransaction } from '@canton-network/core-ledger-proto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { damlValueToJson, jsonToDamlValue } from '../proto/daml-value.js';
import { userIdFromAuthorization } from './bearer.js';
import { executeSubmission, interpret, parseSubmission, traceOf, type Command, type Submission } from './commands.js';
import { bodyObject, optionalObject, relaxedObjectArray, relaxedString } from './decode.js';
import { invalidArgument, invalidField, missingField } from './errors.js';
import { jsonBodyOf } from './http-conventions.js';
import type { Json, JsonObject } from './json.js';
import { SANDBOX_SEED } from './seed.js';
import type { LedgerNode, SandboxState } from './state.js';
import { defaultTransactionFormat, parseTransactionFormat, renderTransaction } from './transactions.js';

/** The Daml-LF version the sandbox's nodes claim. */
const LF_VERSION = '2.1';
const MAX_VALUE_DEPTH = 1_000;

let bindings: Promise<typeof import('@canton-network/core-ledger-proto')> | undefined;
/** The protobuf bindings, loaded once, at the first prepare or execute. */
const ledgerProto = () => (bindings ??= import('@canton-network/core-ledger-proto'));

/** interactive_submission_data.proto's Node, which the package's index does not name. */
type Node = Extract<DamlTransaction_Node['versionedNode'], { oneofKind: 'v1' }>['v1'];

function identifier(templateId: string) {
  const [packageId = '', moduleName = '', entityName = ''] = templateId.split(':');
  return { packageId, moduleName, entityName };
}

function nodeOf(node: LedgerNode): Node {
  const contract = node.contract;
  const common = {
    lfVersion: LF_VERSION,
    contractId: contract.contractId,
    packageName: contract.packageName,
    signatories: [...contract.signatories],
    stakeholders: [...new Set([...contract.signatories, ...contract.observers])],
  };
  if (node.kind === 'create')
    return {
      nodeType: {
        oneofKind: 'create',
        create: {
          ...common,
          templateId: identifier(contract.templateId),
          argument: jsonToDamlValue(contract.createArgument),
        },
      },
    };
  return {
    nodeType: {
      oneofKind: 'exercise',
      exercise: {
        ...common,
        templateId: identifier(node.templateId),
        choiceId: node.choice,
        chosenValue: jsonToDamlValue(node.choiceArgument),
        actingParties: [...node.actingParties],
        consuming: node.consuming,
        children: [],
        exerciseResult: jsonToDamlValue(node.exerciseResult),
        choiceObservers: [],
      },
    },
  };
}

/** The submission's effect at the ledger end, as a PreparedTransaction (nothing is committed). */
export async function prepareTransaction(state: SandboxState, submission: Submission): Promise<Uint8Array> {
  const nodes = interpret(state, submission, state.ledgerEnd + 1, new Date().toISOString());
  const { PreparedTransaction } = await ledgerProto();
  // create() fills the fields left out with their defaults, as the writer needs every one.
  const prepared = PreparedTransaction.create({
    transaction: {
      version: LF_VERSION,
      roots: nodes.map((node) => String(node.nodeId)),
      nodes: nodes.map((node) => ({
        nodeId: String(node.nodeId),
        versionedNode: { oneofKind: 'v1' as const, v1: nodeOf(node) },
      })),
    },
    metadata: {
      submitterInfo: { actAs: [...submission.actAs], commandId: submission.commandId },
      synchronizerId: submission.synchronizerId || SANDBOX_SEED.synchronizers.global.synchronizerId,
      transactionUuid: randomUUID(),
      preparationTime: BigInt(Date.now()) * 1000n,
    },
  });
  return PreparedTransaction.toBinary(prepared);
}

/** The commands a prepared transaction's roots stand for: a create and an exercise of its contract are one CreateAndExercise. */
function commandsOf(prepared: PreparedTransaction): Command[] {
  const byId = new Map(prepared.transaction?.nodes.map((node) => [node.nodeId, node]) ?? []);
  const commands: Command[] = [];
  const createdAt = new Map<string, number>();
  for (const root of prepared.transaction?.roots ?? []) {
    const versioned = byId.get(root)?.versionedNode;
    const type = versioned?.oneofKind === 'v1' ? versioned.v1.nodeType : undefined;
    if (type?.oneofKind === 'create') {
      const t = type.create.templateId;
      createdAt.set(type.create.contractId, commands.length);
      commands.push({
        kind: 'create',
        templateId: `${t?.packageId}:${t?.moduleName}:${t?.entityName}`,
        createArguments: damlValueToJson(type.create.argument, MAX_VALUE_DEPTH) as Json,
      });
    } else if (type?.oneofKind === 'exercise') {
      const exercise = type.exercise;
      const t = exercise.templateId;
      const templateId = `${t?.packageId}:${t?.moduleName}:${t?.entityName}`;
      const choiceArgument = damlValueToJson(exercise.chosenValue, MAX_VALUE_DEPTH) as Json;
      const created = createdAt.get(exercise.contractId);
      const earlier = created === undefined ? undefined : commands[created];
      if (earlier?.kind === 'create')
        commands[created!] = { ...earlier, kind: 'createAndExercise', choice: exercise.choiceId, choiceArgument };
      else
        commands.push({
          kind: 'exercise',
          templateId,
          contractId: exercise.contractId,
          choice: exercise.choiceId,
          choiceArgument,
        });
    } else {
      throw invalidArgument(`The prepared transaction has a root node the sandbox cannot execute: ${root}`);
    }
  }
  return commands;
}

/** The execute request: its prepared transaction decoded, every actAs party's signature present. */
async function executedSubmission(body: JsonObject, tokenUserId: string | undefined): Promise<Submission> {
  const encoded = relaxedString(body, 'preparedTransaction', '');
  if (encoded === '') throw missingField('prepared_transaction');
  const bindings = await ledgerProto();
  let prepared: PreparedTransaction;
  try {
    prepared = bindings.PreparedTransaction.fromBinary(Buffer.from(encoded, 'base64'));
  } catch {
    throw invalidField('prepared_transaction', 'The prepared transaction could not be decoded');
  }
  const submitter = prepared.metadata?.submitterInfo;
  const signatures = optionalObject(body, 'partySignatures', '') ?? {};
  const signed = new Set(
    relaxedObjectArray(signatures, 'signatures', 'partySignatures').map((s) => relaxedString(s, 'party', '')),
  );
  const unsigned = (submitter?.actAs ?? []).filter((party) => !signed.has(party));
  if (unsigned.length > 0) throw invalidArgument(`Missing signatures of the act-as parties: ${unsigned.join(', ')}`);
  const userId = relaxedString(body, 'userId', '') || (tokenUserId ?? '');
  if (userId === '') throw missingField('user_id');
  return {
    userId,
    commandId: submitter?.commandId ?? '',
    workflowId: '',
    actAs: submitter?.actAs ?? [],
    readAs: [],
    synchronizerId: prepared.metadata?.synchronizerId ?? '',
    commands: commandsOf(prepared),
  };
}

export function registerInteractiveRoutes(app: FastifyInstance, state: SandboxState): void {
  const tokenUser = (request: FastifyRequest) => userIdFromAuthorization(request.headers.authorization);

  app.post('/v2/interactive-submission/prepare', async (request) => {
    const submission = parseSubmission(bodyObject(jsonBodyOf(request)), '', tokenUser(request));
    const bytes = await prepareTransaction(state, submission);
    return {
      preparedTransaction: Buffer.from(bytes).toString('base64'),
      preparedTransactionHash: createHash('sha256').update(bytes).digest('base64'),
      hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V2',
      hashingDetails: null,
      costEstimation: null,
    };
  });

  const execute = async (request: FastifyRequest) => {
    const submission = await executedSubmission(bodyObject(jsonBodyOf(request)), tokenUser(request));
    return { submission, transaction: executeSubmission(state, submission, traceOf(request)) };
  };
  app.post('/v2/interactive-submission/execute', async (request) => {
    await execute(request);
    return {};
  });
  app.post('/v2/interactive-submission/executeAndWait', async (request) => {
    const { transaction } = await execute(request);
    return { updateId: transaction.updateId, completionOffset: transaction.offset };
  });
  app.post('/v2/interactive-submission/executeAndWaitForTransaction', async (request) => {
    const formatJson = optionalObject(bodyObject(jsonBodyOf(request)), 'transactionFormat', '');
    // Judged before anything commits, as Canton validates the whole request first.
    const explicit = formatJson === undefined ? undefined : parseTransactionFormat(formatJson, 'transactionFormat');
    const { submission, transaction } = await execute(request);
    const format = explicit ?? defaultTransactionFormat([...submission.actAs]);
    return { transaction: renderTransaction(transaction, format).transaction };
  });
}
