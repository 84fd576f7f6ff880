// What identifies a ledger write in its request, and what the participant's answer says it became:
// the fields an auditor searches by (Canton's command, submission and workflow ids, the parties
// acting and reading, the user and its rights, the package ids vetted), never a command's
// arguments. Field names are those of Canton's JSON Ledger API v2 (openapi.yaml: JsCommands,
// ReassignmentCommands, UpdateVettedPackagesRequest, AllocatePartyRequest, CreateUserRequest,
// GrantUserRightsRequest, UpdateIdentityProviderConfigRequest, the interactive submission requests).

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** Scalar (or string-list) fields kept wherever they appear at the top or in an envelope below. */
const IDENTIFYING_KEYS: readonly string[] = [
  'commandId',
  'submissionId',
  'workflowId',
  'userId',
  'actAs',
  'readAs',
  'submitter',
  'synchronizerId',
  'synchronizer',
  'dryRun',
  'expectedTopologySerial',
  'partyIdHint',
  'party',
  'identityProviderId',
  'sourceIdentityProviderId',
  'targetIdentityProviderId',
  'id',
  'primaryParty',
  'isDeactivated',
  'issuer',
  'jwksUrl',
  'audience',
  'waitForAllocation',
  'hashingSchemeVersion',
];

/** The objects a request wraps its identifying fields in (Canton's request envelopes). */
const ENVELOPES: readonly string[] = [
  'commands',
  'reassignmentCommands',
  'user',
  'partyDetails',
  'identityProviderConfig',
];

const MAX_LIST = 100;
const MAX_TEXT = 512;

function scalar(value: unknown): unknown {
  if (typeof value === 'string') return value.length > MAX_TEXT ? `${value.slice(0, MAX_TEXT)}…` : value;
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return value;
  if (Array.isArray(value))
    return value
      .slice(0, MAX_LIST)
      .map(scalar)
      .filter((item) => item !== undefined);
  return undefined;
}

function pick(source: Json, into: Json): void {
  for (const key of IDENTIFYING_KEYS) {
    if (!(key in source) || key in into) continue;
    const value = scalar(source[key]);
    if (value !== undefined) into[key] = value;
  }
}

/** A command's kind, template, choice and contract: what it does, not its arguments. */
function commandSummary(command: unknown): Json | undefined {
  if (!isObject(command)) return undefined;
  const kind = Object.keys(command)[0];
  if (kind === undefined) return undefined;
  const inner = command[kind];
  const summary: Json = { kind };
  if (isObject(inner)) {
    for (const key of ['templateId', 'choice', 'contractId', 'reassignmentId', 'source', 'target']) {
      const value = scalar(inner[key]);
      if (typeof value === 'string') summary[key] = value;
    }
  }
  return summary;
}

/** Every `packageId` string at any depth (vetting changes, package filters), at most MAX_LIST. */
function packageIds(value: unknown, out: string[], depth = 0): void {
  if (depth > 8 || out.length >= MAX_LIST) return;
  if (Array.isArray(value)) for (const item of value) packageIds(item, out, depth + 1);
  else if (isObject(value)) {
    for (const [key, field] of Object.entries(value)) {
      if (key === 'packageId' && typeof field === 'string') out.push(field);
      else packageIds(field, out, depth + 1);
    }
  }
}

/** A right's kind and its party or idp (CanActAs, CanReadAs, IdentityProviderAdmin, ...). */
function rightsSummary(rights: unknown): unknown[] | undefined {
  if (!Array.isArray(rights)) return undefined;
  return rights.slice(0, MAX_LIST).map((right) => {
    const kind = isObject(right) && isObject(right.kind) ? Object.keys(right.kind)[0] : undefined;
    const value = kind === undefined ? undefined : (right as { kind: Json }).kind[kind];
    const party = isObject(value) && isObject(value.value) ? scalar(value.value.party) : undefined;
    return party === undefined ? { kind: kind ?? null } : { kind, party };
  });
}

/** The identifying fields of a write's parsed JSON body. */
export function identifyingFields(body: Json): Json {
  const fields: Json = {};
  pick(body, fields);
  for (const name of ENVELOPES) {
    const envelope = body[name];
    if (isObject(envelope)) pick(envelope, fields);
  }
  const commandList = isObject(body.commands)
    ? body.commands.commands
    : isObject(body.reassignmentCommands)
      ? body.reassignmentCommands.commands
      : body.commands;
  if (Array.isArray(commandList))
    fields.commands = commandList
      .slice(0, MAX_LIST)
      .map(commandSummary)
      .filter((c) => c !== undefined);
  const rights = rightsSummary(body.rights);
  if (rights !== undefined) fields.rights = rights;
  const mask = body.updateMask;
  if (isObject(mask) && Array.isArray(mask.paths)) fields.updateMaskPaths = scalar(mask.paths);
  if (Array.isArray(body.changes)) {
    const ids: string[] = [];
    packageIds(body.changes, ids);
    fields.packageIds = ids;
    fields.changes = body.changes.slice(0, MAX_LIST).map((change) => {
      const operation = isObject(change) && isObject(change.operation) ? Object.keys(change.operation)[0] : undefined;
      return operation ?? null;
    });
  }
  const signatures = body.partySignatures;
  if (isObject(signatures) && Array.isArray(signatures.signatures))
    fields.signingParties = signatures.signatures
      .slice(0, MAX_LIST)
      .map((s) => (isObject(s) ? scalar(s.party) : undefined))
      .filter((p) => typeof p === 'string');
  return fields;
}

/** What the participant's answer says the write became, where it says it. */
export interface AnswerFields {
  updateId?: string;
  offset?: string | number;
  completionOffset?: string | number;
  recordTime?: string;
  party?: string;
  preparedTransactionHash?: string;
}

const ANSWER_KEYS = ['updateId', 'offset', 'completionOffset', 'recordTime', 'preparedTransactionHash'] as const;
const ANSWER_ENVELOPES = ['transaction', 'reassignment', 'transactionTree', 'partyDetails'] as const;

function answerFrom(source: Json, into: AnswerFields): void {
  for (const key of ANSWER_KEYS) {
    const value = source[key];
    if (into[key] === undefined && (typeof value === 'string' || typeof value === 'number'))
      (into as Record<string, unknown>)[key] = value;
  }
  if (typeof source.party === 'string' && into.party === undefined) into.party = source.party;
}

/** Reads the answer fields from a whole JSON answer. */
export function answerFields(body: unknown): AnswerFields {
  const fields: AnswerFields = {};
  if (!isObject(body)) return fields;
  answerFrom(body, fields);
  for (const name of ANSWER_ENVELOPES) {
    const envelope = body[name];
    if (isObject(envelope)) answerFrom(envelope, fields);
  }
  return fields;
}

const PREFIX_FIELD = /"(updateId|offset|completionOffset|recordTime)"\s*:\s*("(?:[^"\\]|\\.){0,512}"|-?\d{1,20})/g;

/**
 * Reads the answer fields from the first bytes of an answer too large to keep whole: Canton writes
 * a transaction's updateId, offset and recordTime before its events.
 */
export function answerFieldsFromPrefix(text: string): AnswerFields {
  const fields: AnswerFields = {};
  for (const match of text.matchAll(PREFIX_FIELD)) {
    const key = match[1] as 'updateId' | 'offset' | 'completionOffset' | 'recordTime';
    if (fields[key] !== undefined) continue;
    const raw = match[2]!;
    (fields as Record<string, unknown>)[key] = raw.startsWith('"') ? (JSON.parse(raw) as string) : Number(raw);
  }
  return fields;
}
