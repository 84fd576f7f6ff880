// Shared by the ledger-policy tests: a principal, decision documents built the way calls build them,
// and a ledgerPolicy section through the schema's defaults.
import { Value } from '@sinclair/typebox/value';
import { decisionDocument, principalFacts } from '../../src/ledger-policy/build-document.js';
import type { DecisionDocument, PrincipalFacts } from '../../src/ledger-policy/document.js';
import type { PreparedSummary } from '../../src/ledger-policy/prepared-summary.js';
import { LedgerPolicySchema, type LedgerPolicyConfig } from '../../src/config/schema.js';
import { WRITE_OPERATION_NAMES } from '../../src/operations.js';
import { SANDBOX_SEED } from '../../src/sandbox/app.js';
import { commitSeedTransaction, type Submission } from '../../src/sandbox/commands.js';
import { prepareTransaction } from '../../src/sandbox/interactive.js';
import { createSandboxState } from '../../src/sandbox/state.js';
import { trailDirectory } from '../audit/support.js';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { logCapture } from '../helpers/log-capture.js';
import type { PerTest } from '../helpers/per-test.js';
import { startSandbox } from '../sandbox/helpers.js';

export const ALICE = SANDBOX_SEED.parties.alice;
export const BOB = SANDBOX_SEED.parties.bob;
export const OPERATOR = SANDBOX_SEED.parties.operator;
export const IOU_PACKAGE_ID = SANDBOX_SEED.packages.iouV1.packageId;
export const IOU_BY_ID = SANDBOX_SEED.templates.iou;
export const IOU_BY_NAME = SANDBOX_SEED.templates.iouByPackageName;

export function principal(subject: string, claims: Record<string, unknown> = {}, address = '10.0.0.7'): PrincipalFacts {
  return principalFacts(
    { subject, issuer: 'https://idp.example', claims: { sub: subject, ...claims } },
    { clientAddress: address },
  );
}

export function document(
  operation: string,
  body: unknown,
  caller: PrincipalFacts = principal('alice'),
  extra: { pathParameters?: { party?: string; userId?: string }; prepared?: PreparedSummary } = {},
): DecisionDocument {
  return decisionDocument({
    operation,
    writes: WRITE_OPERATION_NAMES.has(operation),
    principal: caller,
    body,
    ...extra,
  });
}

export const create = (templateId: string, createArguments: object = { owner: ALICE }) => ({
  CreateCommand: { templateId, createArguments },
});
/** Alice's Transfer of the sandbox's seeded Iou to Bob: the choice the tests' policies deny. */
export const TRANSFER = {
  ExerciseCommand: {
    templateId: IOU_BY_ID,
    contractId: SANDBOX_SEED.initialTransaction.contractId,
    choice: 'Transfer',
    choiceArgument: { newOwner: BOB },
  },
};
export const exercise = (templateId: string, choice: string, choiceArgument: object = {}) => ({
  ExerciseCommand: { templateId, contractId: '00abc', choice, choiceArgument },
});

export function submission(commands: object[], actAs: string[] = [ALICE], extra: object = {}) {
  return { commands: { commands, commandId: 'c-1', actAs, ...extra } };
}

/** A ledgerPolicy section with the schema's defaults filled in. */
export function section(policies: unknown[]): LedgerPolicyConfig {
  return Value.Default(LedgerPolicySchema, Value.Clone({ policies })) as LedgerPolicyConfig;
}

/** The ledger policy's decisions a gateway counted whose labels include `labels` (all of them by default). */
export async function decisions(gw: RunningGateway, labels: Record<string, string> = {}): Promise<number> {
  const metric = (await gw.registry.getMetricsAsJSON()).find(
    (m) => m.name === 'ledger_gateway_ledger_policy_decisions_total',
  );
  if (metric === undefined) throw new Error('no ledger_gateway_ledger_policy_decisions_total metric');
  return (metric.values as Array<{ value: number; labels: Record<string, string | number> }>)
    .filter((v) => Object.entries(labels).every(([k, l]) => String(v.labels[k]) === l))
    .reduce((sum, v) => sum + v.value, 0);
}

/**
 * A gateway in front of the sandbox with `ledgerPolicy` and the audit trail on, its log captured;
 * both put into `current` to be closed after the test.
 */
export async function auditedSandboxGateway(current: PerTest, ledgerPolicy: unknown) {
  const sandbox = await startSandbox();
  current.upstream = sandbox;
  const log = logCapture();
  const directory = trailDirectory();
  const gw = await startGateway(
    sandbox.url,
    { ledgerPolicy, audit: { enabled: true, directory } },
    { logger: log.logger },
  );
  current.gw = gw;
  return { sandbox, gw, log, directory };
}

/** A prepared transaction of `commands` (base64, as an execute carries it), prepared by the sandbox on its seed. */
export async function preparedBySandbox(commands: Submission['commands'], actAs: string[] = [ALICE]): Promise<string> {
  const state = createSandboxState();
  commitSeedTransaction(state);
  const submission: Submission = {
    userId: 'alice',
    commandId: 'c',
    workflowId: '',
    actAs,
    readAs: [],
    synchronizerId: '',
    commands,
  };
  return Buffer.from(await prepareTransaction(state, submission)).toString('base64');
}
