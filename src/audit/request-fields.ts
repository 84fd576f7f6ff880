// What identifies a ledger write in its request, and what the participant's answer says it became:
// the fields an auditor searches by (Canton's command, submission and workflow ids, the parties
// acting and reading, the user and its rights, the package ids vetted), never a command's
// arguments. Field names are those of Canton's JSON Ledger API v2 (openapi.yaml: JsCommands,
// ReassignmentCommands, UpdateVettedPackagesRequest, AllocatePartyRequest, CreateUserRequest,
// GrantUserRightsRequest, UpdateIdentityProviderConfigRequest, the interactive submission requests).
import { Cuts, MAX_LIST } from './record-bounds.js';

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

/** A string within its bytes, a number, a boolean, null, or a list of those within MAX_LIST; else undefined. */
function scalar(value: unknown, name: string, cuts: Cuts): unknown {
  if (typeof value === 'string') return cuts.text(name, value);
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return value;
  if (Array.isArray(value))
    return cuts
      .list(name, value)
      .map((item) => scalar(item, name, cuts))
      .filter((item) => item !== undefined && !Array.isArray(item));
  return undefined;
}

function pick(source: Json, into: Json, cuts: Cuts): void {
  for (const key of IDENTIFYING_KEYS) {
    if (!(key in source) || key in into) continue;
    const value = scalar(source[key], key, cuts);
    if (value !== undefined) into[key] = value;
  }
}

/** A command's kind, template, choice and contract: what it does, not its arguments. */
function commandSummary(command: unknown, cuts: Cuts): Json | undefined {
  if (!isObject(command)) return undefined;
  const kind = Object.keys(command)[0];
  if (kind === undefined) return undefined;
  const inner = command[kind];
  const summary: Json = { kind: cuts.text('commands', kind) };
  if (isObject(inner)) {
    for (const key of ['templateId', 'choice', 'contractId', 'reassignmentId', 'source', 'target']) {
      const value = inner[key];
      if (typeof value === 'string') summary[key] = cuts.text('commands', value);
    }
  }
  return summary;
}

/** Every `packageId` string at any depth (vetting changes, package filters), at most MAX_LIST. */
function packageIds(value: unknown, out: string[], cuts: Cuts, depth = 0): void {
  if (depth > 8) return;
  if (Array.isArray(value)) for (const item of value) packageIds(item, out, cuts, depth + 1);
  else if (isObject(value)) {
    for (const [key, field] of Object.entries(value)) {
      if (key !== 'packageId' || typeof field !== 'string') packageIds(field, out, cuts, depth + 1);
      else if (out.length < MAX_LIST) out.push(cuts.text('packageIds', field));
      else cuts.mark('packageIds');
    }
  }
}

/** A right's kind and its party or idp (CanActAs, CanReadAs, IdentityProviderAdmin, ...). */
function rightsSummary(rights: unknown, cuts: Cuts): unknown[] | undefined {
  if (!Array.isArray(rights)) return undefined;
  return cuts.list('rights', rights).map((right) => {
    const kind = isObject(right) && isObject(right.kind) ? Object.keys(right.kind)[0] : undefined;
    const value = kind === undefined ? undefined : (right as { kind: Json }).kind[kind];
    const party = isObject(value) && isObject(value.value) ? scalar(value.value.party, 'rights', cuts) : undefined;
    const named = kind === undefined ? null : cuts.text('rights', kind);
    return party === undefined ? { kind: named } : { kind: named, party };
  });
}

/** The vetting changes' kinds (Vet, Unvet) and the package ids they name. */
function vettingChanges(changes: unknown[], fields: Json, cuts: Cuts): void {
  const ids: string[] = [];
  packageIds(changes, ids, cuts);
  fields.packageIds = ids;
  fields.changes = cuts.list('changes', changes).map((change) => {
    const operation = isObject(change) && isObject(change.operation) ? Object.keys(change.operation)[0] : undefined;
    return operation === undefined ? null : cuts.text('changes', operation);
  });
}

/**
 * The identifying fields of a write's parsed JSON body, each string within MAX_TEXT_BYTES of JSON
 * text and each list within MAX_LIST items; `truncated` names the fields that were cut.
 */
export function identifyingFields(body: Json): Json {
  const fields: Json = {};
  const cuts = new Cuts();
  pick(body, fields, cuts);
  for (const name of ENVELOPES) {
    const envelope = body[name];
    if (isObject(envelope)) pick(envelope, fields, cuts);
  }
  const commandList = isObject(body.commands)
    ? body.commands.commands
    : isObject(body.reassignmentCommands)
      ? body.reassignmentCommands.commands
      : body.commands;
  if (Array.isArray(commandList))
    fields.commands = cuts
      .list('commands', commandList)
      .map((command) => commandSummary(command, cuts))
      .filter((c) => c !== undefined);
  const rights = rightsSummary(body.rights, cuts);
  if (rights !== undefined) fields.rights = rights;
  const mask = body.updateMask;
  if (isObject(mask) && Array.isArray(mask.paths)) fields.updateMaskPaths = scalar(mask.paths, 'updateMaskPaths', cuts);
  if (Array.isArray(body.changes)) vettingChanges(body.changes, fields, cuts);
  const signatures = body.partySignatures;
  if (isObject(signatures) && Array.isArray(signatures.signatures))
    fields.signingParties = cuts
      .list('signingParties', signatures.signatures)
      .map((s) => (isObject(s) ? scalar(s.party, 'signingParties', cuts) : undefined))
      .filter((p) => typeof p === 'string');
  return cuts.into(fields);
}

/** What the participant's answer says the write became, where it says it. */
export interface AnswerFields {
  updateId?: string;
  offset?: string | number;
  completionOffset?: string | number;
  recordTime?: string;
  party?: string;
  preparedTransactionHash?: string;
  /** The fields cut to MAX_TEXT_BYTES. */
  truncated?: string[];
}

const ANSWER_KEYS = ['updateId', 'offset', 'completionOffset', 'recordTime', 'preparedTransactionHash'] as const;
const ANSWER_ENVELOPES = ['transaction', 'reassignment', 'transactionTree', 'partyDetails'] as const;

function answerFrom(source: Json, into: AnswerFields, cuts: Cuts): void {
  for (const key of [...ANSWER_KEYS, 'party'] as const) {
    const value = source[key];
    if (into[key] !== undefined) continue;
    if (typeof value === 'string') (into as Record<string, unknown>)[key] = cuts.text(key, value);
    else if (typeof value === 'number' && key !== 'party') (into as Record<string, unknown>)[key] = value;
  }
}

/** Reads the answer fields from a whole JSON answer, each string within MAX_TEXT_BYTES (`truncated` names a cut). */
export function answerFields(body: unknown): AnswerFields {
  const fields: AnswerFields = {};
  if (!isObject(body)) return fields;
  const cuts = new Cuts();
  answerFrom(body, fields, cuts);
  for (const name of ANSWER_ENVELOPES) {
    const envelope = body[name];
    if (isObject(envelope)) answerFrom(envelope, fields, cuts);
  }
  return cuts.into(fields);
}

const PREFIX_FIELD = /"(updateId|offset|completionOffset|recordTime)"\s*:\s*("(?:[^"\\]|\\.){0,512}"|-?\d{1,20})/g;

/**
 * Reads the answer fields from the first bytes of an answer too large to keep whole: Canton writes
 * a transaction's updateId, offset and recordTime before its events.
 */
export function answerFieldsFromPrefix(text: string): AnswerFields {
  const fields: AnswerFields = {};
  const cuts = new Cuts();
  for (const match of text.matchAll(PREFIX_FIELD)) {
    const key = match[1] as 'updateId' | 'offset' | 'completionOffset' | 'recordTime';
    if (fields[key] !== undefined) continue;
    const raw = match[2]!;
    (fields as Record<string, unknown>)[key] = raw.startsWith('"')
      ? cuts.text(key, JSON.parse(raw) as string)
      : Number(raw);
  }
  return cuts.into(fields);
}
