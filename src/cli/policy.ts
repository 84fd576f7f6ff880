// `ledger-gateway policy test --config F --request R [--claims C]`: the decision of the ledger policy
// of config F on one call (R: JSON { method, path, body }, C: the token's claims as JSON), the rule that
// made it and why. `ledger-gateway policy replay --trail DIR --config F`: every write recorded in an
// audit trail decided again under F's policy, with what would change and what the recorded level
// cannot decide. Exit 0 (allowed, or nothing would change), 1 (refused, or some write would be), 2 (a
// bad command line, file or configuration).
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { loadConfiguration } from '../config/load.js';
import { decisionDocument, pathParameters, principalFacts } from '../ledger-policy/build-document.js';
import type { DecisionDocument } from '../ledger-policy/document.js';
import { createLedgerPolicy, type Decision, type LedgerPolicy } from '../ledger-policy/ledger-policy.js';
import { preparedTransactionBytes, type PreparedSummary } from '../ledger-policy/prepared-summary.js';
import { summarizePreparedTransaction } from '../ledger-policy/prepared-transaction.js';
import { matchOperation, SubmissionOperations } from '../operations.js';
import { replayTrail, type PolicyCommandResult } from './policy-replay.js';

export const POLICY_USAGE = [
  'usage: ledger-gateway policy test --config <file> --request <JSON file> [--claims <JSON file>]',
  '       ledger-gateway policy replay --trail <directory> --config <file>',
].join('\n');

const EXECUTES: ReadonlySet<string> = new Set([
  SubmissionOperations.execute,
  SubmissionOperations.executeAndWait,
  SubmissionOperations.executeAndWaitForTransaction,
]);

/** The ledger policy of a config file, as the gateway would build it (no participant: package ids stay unresolved). */
export function policyOfConfig(file: string): LedgerPolicy {
  return createLedgerPolicy(loadConfiguration(file, {}).config.ledgerPolicy);
}

interface RequestFile {
  readonly method?: unknown;
  readonly path?: unknown;
  readonly body?: unknown;
  readonly clientAddress?: unknown;
}

/** The decision document of a request file under these claims. */
export function documentOfRequest(request: RequestFile, claims: Record<string, unknown>): DecisionDocument {
  if (typeof request.method !== 'string' || typeof request.path !== 'string')
    throw new Error('the request file names no "method" and "path"');
  const operation = matchOperation(request.method.toUpperCase(), request.path);
  if (operation === undefined || operation.name === 'unknown')
    throw new Error(`no operation serves ${request.method} ${request.path}`);
  const body = request.body as Record<string, unknown> | undefined;
  let prepared: PreparedSummary | undefined;
  if (EXECUTES.has(operation.name))
    prepared = summarizePreparedTransaction(preparedTransactionBytes(body?.preparedTransaction));
  const principal = principalFacts(
    {
      subject: typeof claims.sub === 'string' ? claims.sub : '',
      issuer: typeof claims.iss === 'string' ? claims.iss : undefined,
      claims,
    },
    { clientAddress: typeof request.clientAddress === 'string' ? request.clientAddress : '' },
  );
  return decisionDocument({
    operation: operation.name,
    writes: operation.writes,
    principal,
    body,
    pathParameters: pathParameters(operation.template, request.path),
    ...(prepared === undefined ? {} : { prepared }),
  });
}

export function describeDecision(decision: Decision, operation: string): string {
  const lines = [`operation: ${operation}`];
  if (decision.effect === 'none')
    return [...lines, 'decision:  none (no ledger policy names the caller)', ''].join('\n');
  lines.push(`decision:  ${decision.effect}${decision.mode === 'dryRun' ? ' (dry run: recorded, not enforced)' : ''}`);
  lines.push(`policy:    ${decision.policy}`, `rule:      ${decision.rule}`, `why:       ${decision.reason}`, '');
  return lines.join('\n');
}

async function testCommand(values: Record<string, string | undefined>): Promise<PolicyCommandResult> {
  if (values.config === undefined || values.request === undefined) return { code: 2, output: `${POLICY_USAGE}\n` };
  const policy = policyOfConfig(values.config);
  const request = JSON.parse(readFileSync(values.request, 'utf8')) as RequestFile;
  const claims =
    values.claims === undefined ? {} : (JSON.parse(readFileSync(values.claims, 'utf8')) as Record<string, unknown>);
  const document = documentOfRequest(request, claims);
  const decision = await policy.decide(document);
  return { code: decision.effect === 'deny' ? 1 : 0, output: describeDecision(decision, document.operation) };
}

export async function runPolicyCommand(argv: readonly string[]): Promise<PolicyCommandResult> {
  let values: Record<string, string | undefined>;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args: [...argv],
      options: {
        config: { type: 'string' },
        request: { type: 'string' },
        claims: { type: 'string' },
        trail: { type: 'string' },
      },
      allowPositionals: true,
      strict: true,
    }));
  } catch (error) {
    return { code: 2, output: `${(error as Error).message}\n${POLICY_USAGE}\n` };
  }
  try {
    if (positionals[0] === 'test' && positionals.length === 1) return await testCommand(values);
    if (
      positionals[0] === 'replay' &&
      positionals.length === 1 &&
      values.trail !== undefined &&
      values.config !== undefined
    )
      return await replayTrail(values.trail, policyOfConfig(values.config));
  } catch (error) {
    return { code: 2, output: `cannot decide: ${(error as Error).message}\n` };
  }
  return { code: 2, output: `${POLICY_USAGE}\n` };
}
