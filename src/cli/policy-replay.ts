// `policy replay`: each write an audit trail recorded (its intent record, docs/audit.md) decided again
// under a new ledger policy, beside what happened to it (its outcome record). A record keeps less than
// the call carried: never the token's claims, the client certificate or the consumer; the commands'
// arguments only at level body; nothing of the body at level metadata. What a rule would need of that
// is named, per record, as undecidable at the recorded level, never guessed.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { trailFiles } from '../audit/trail-files.js';
import { decisionDocument, pathParameters, principalFacts } from '../ledger-policy/build-document.js';
import type { DecisionDocument } from '../ledger-policy/document.js';
import type { LedgerPolicy } from '../ledger-policy/ledger-policy.js';
import { preparedTransactionBytes, type PreparedSummary } from '../ledger-policy/prepared-summary.js';
import { summarizePreparedTransaction } from '../ledger-policy/prepared-transaction.js';
import type { Fact } from '../ledger-policy/rules.js';
import { HTTP_OPERATIONS, SubmissionOperations } from '../operations.js';
import { Errors } from '../errors.js';

/** What a policy command prints, and its exit status. */
export interface PolicyCommandResult {
  readonly code: number;
  readonly output: string;
}

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json =>
  value !== null && typeof value === 'object' && !Array.isArray(value);
/** A record's text field, '' when it holds none. */
const text = (value: unknown): string => (typeof value === 'string' || typeof value === 'number' ? String(value) : '');

/** Never in a record: what the token and the connection carried beyond subject, issuer and address. */
const NEVER_RECORDED: readonly Fact[] = ['claims', 'certificate', 'consumer'];
const EXECUTES: ReadonlySet<string> = new Set([
  SubmissionOperations.execute,
  SubmissionOperations.executeAndWait,
  SubmissionOperations.executeAndWaitForTransaction,
]);
const TEMPLATES = new Map(HTTP_OPERATIONS.map((operation) => [operation.name, operation]));

/** A body with the identifying fields a record at level request keeps (audit/request-fields.ts), in Canton's shapes. */
function bodyOfFields(operation: string, fields: Json): Json {
  const commands = (Array.isArray(fields.commands) ? fields.commands : []).filter(isObject).map((command) => {
    const { kind, ...rest } = command;
    return { [String(kind)]: rest };
  });
  const rights = (Array.isArray(fields.rights) ? fields.rights : []).filter(isObject).map((right) => ({
    kind: { [String(right.kind)]: { value: right.party === undefined ? {} : { party: right.party } } },
  }));
  const jsCommands = { commands, actAs: fields.actAs, readAs: fields.readAs, userId: fields.userId };
  if (fields.submitter !== undefined)
    return {
      reassignmentCommands: {
        submitter: fields.submitter,
        commands: commands.map((command) => {
          const [kind, value] = Object.entries(command)[0] ?? ['', {}];
          return { command: { [kind]: { value } } };
        }),
      },
    };
  if (operation === 'submitAndWaitForTransaction') return { commands: jsCommands };
  return { ...fields, ...jsCommands, rights };
}

/** The document of an intent record and what its level did not keep. */
function documentOfIntent(record: Json): { document: DecisionDocument; unknown: Set<Fact> } {
  const operation = String(record.operation);
  const unknown = new Set<Fact>(NEVER_RECORDED);
  const level = record.level;
  let body: Json = {};
  if (level === 'body' && isObject(record.body)) body = record.body;
  else if (level === 'request' && isObject(record.request)) {
    body = bodyOfFields(operation, record.request);
    unknown.add('arguments');
    if (operation === 'updateVettedPackages') unknown.add('packages');
  } else for (const fact of ['parties', 'commands', 'arguments', 'packages', 'rights'] as const) unknown.add(fact);
  let prepared: PreparedSummary | undefined;
  if (EXECUTES.has(operation)) {
    try {
      prepared = summarizePreparedTransaction(preparedTransactionBytes(body.preparedTransaction));
    } catch {
      for (const fact of ['parties', 'commands', 'arguments'] as const) unknown.add(fact);
    }
  }
  const caller = isObject(record.principal) ? record.principal : {};
  const principal = principalFacts(
    {
      subject: text(caller.subject),
      issuer: typeof caller.issuer === 'string' ? caller.issuer : undefined,
      claims: {},
    },
    { clientAddress: text(record.clientAddress) },
  );
  const document = decisionDocument({
    operation,
    writes: true,
    principal,
    body,
    pathParameters: pathParameters(TEMPLATES.get(operation)?.template ?? '', text(record.path)),
    ...(prepared === undefined ? {} : { prepared }),
    // A prepared transaction that was not recorded cannot be read: that is not the caller's doing.
    preparedUnrecorded: prepared === undefined && EXECUTES.has(operation),
  });
  return { document, unknown };
}

/** Every record of the trail's files, oldest first (lines cut short at a crash are skipped). */
async function trailRecords(directory: string): Promise<Json[]> {
  const records: Json[] = [];
  for (const name of await trailFiles(directory)) {
    for (const line of (await readFile(join(directory, name), 'utf8')).split('\n')) {
      if (line === '') continue;
      try {
        const record = JSON.parse(line) as unknown;
        if (isObject(record)) records.push(record);
      } catch {
        // a line cut short: `audit verify` names it
      }
    }
  }
  return records;
}

/** The ledger policy's decision the intent records (a caller a policy named then), as a line says it. */
function recordedDecision(record: Json): string {
  const decided = record.ledgerPolicy;
  if (!isObject(decided)) return '';
  const verb =
    decided.decision === 'deny'
      ? decided.mode === 'dryRun'
        ? 'dry run: would deny'
        : 'denied'
      : decided.decision === 'breakGlass'
        ? 'allowed by break-glass'
        : 'allowed';
  return ` (${verb} by ${text(decided.policy)}/${text(decided.rule)})`;
}

function recordedOutcome(outcome: Json | undefined, intent: Json): { passed: boolean; text: string } {
  if (outcome === undefined) return { passed: false, text: `no outcome recorded${recordedDecision(intent)}` };
  const status = Number(outcome.status);
  const passed = outcome.forwarded === true && status < 400;
  return {
    passed,
    text: `${status}${outcome.errorCode === null || outcome.errorCode === undefined ? '' : ` ${text(outcome.errorCode)}`}${recordedDecision(intent)}`,
  };
}

export async function replayTrail(directory: string, policy: LedgerPolicy): Promise<PolicyCommandResult> {
  const records = await trailRecords(directory);
  const outcomes = new Map(records.filter((r) => r.kind === 'outcome').map((r) => [String(r.intentId), r]));
  const lines: string[] = [];
  let replayed = 0;
  let refused = 0;
  let allowed = 0;
  let undecidable = 0;
  for (const record of records.filter((r) => r.kind === 'intent')) {
    replayed++;
    const { document, unknown } = documentOfIntent(record);
    const decision = await policy.decide(document);
    const conditions = policy.undecidable(document, unknown);
    const before = recordedOutcome(outcomes.get(String(record.id)), record);
    const label = `seq ${String(record.seq)} ${String(record.time)} ${document.operation} by ${document.principal.subject || '(no principal)'} (level ${String(record.level)})`;
    // A deny rule that reads nothing unrecorded refuses whatever the rest would say; any other
    // decision that rests on what was not recorded is not made.
    const byDenyRule = !['default', 'unreadable', 'unresolved-package'].includes(decision.rule);
    const sure =
      conditions.length === 0 ||
      (byDenyRule && !conditions.some((condition) => condition.startsWith(`${decision.policy}/${decision.rule} `)));
    const deniedNow = decision.effect === 'deny' && sure;
    const deniedThen = outcomes.get(String(record.id))?.errorCode === Errors.GATEWAY_LEDGER_POLICY_DENIED.code;
    if (deniedNow && before.passed) {
      refused++;
      lines.push(
        `${label}: recorded ${before.text}; would be REFUSED by ${decision.policy}/${decision.rule}${decision.mode === 'dryRun' ? ' (dry run)' : ''}: ${decision.reason}`,
      );
    } else if (sure && !deniedNow && deniedThen) {
      allowed++;
      lines.push(
        `${label}: recorded ${before.text}; would now pass (${decision.effect === 'none' ? 'no policy names the caller' : decision.rule})`,
      );
    }
    if (!sure) {
      undecidable++;
      lines.push(`${label}: undecidable at the recorded level: ${conditions.join('; ')}`);
    }
  }
  lines.push(
    `${replayed} write(s) replayed: ${refused} would be refused, ${allowed} would now pass, ${undecidable} with conditions undecidable at the recorded level`,
  );
  return { code: refused > 0 ? 1 : 0, output: `${lines.join('\n')}\n` };
}
