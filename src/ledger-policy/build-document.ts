// decisionDocument: one call's document from its operation, its principal and what it carries (its
// JSON body, its path's party or user, the prepared transaction it executes). Pure: the caller parses
// the body and decodes the prepared transaction (prepared-pool.ts) first.
import { pathOf, SubmissionOperations } from '../operations.js';
import { partySubjects, rightsOf, targetUserOf, UPLOADED_ARCHIVE, vettedPackagesOf } from './build-admin.js';
import {
  addUnique,
  isObject,
  jsCommandsPart,
  NO_ENTRIES as NONE,
  reassignmentPart,
  text,
  unique,
  type CommandPart,
} from './build-commands.js';
import { readFacts } from './build-reads.js';
import type {
  CommandFacts,
  DecisionDocument,
  PackageFacts,
  PartyFacts,
  PrincipalFacts,
  ReadFacts,
  RightFacts,
} from './document.js';
import type { PreparedSummary } from './prepared-summary.js';

type Json = Record<string, unknown>;

export interface CallInput {
  /** The operation name (src/operations.ts). */
  readonly operation: string;
  readonly writes: boolean;
  readonly principal: PrincipalFacts;
  /** The parsed JSON body; undefined when the call has none (or carries an archive). */
  readonly body?: unknown;
  /** The `{party}` and `{user-id}` of the path, decoded. */
  readonly pathParameters?: { readonly party?: string; readonly userId?: string };
  /** The decoded preparedTransaction of an execute call. */
  readonly prepared?: PreparedSummary;
  /** An execute call's preparedTransaction was not recorded (replay): unknown, not unreadable. */
  readonly preparedUnrecorded?: boolean;
}

const SUBMISSIONS_OF_JS_COMMANDS: ReadonlySet<string> = new Set([
  SubmissionOperations.submitAndWait,
  SubmissionOperations.submitAndWaitForTransactionTree,
  SubmissionOperations.asyncSubmit,
]);
const EXECUTES: ReadonlySet<string> = new Set([
  SubmissionOperations.execute,
  SubmissionOperations.executeAndWait,
  SubmissionOperations.executeAndWaitForTransaction,
]);
const UPLOADS: ReadonlySet<string> = new Set(['postV2Dars', 'postV2Packages']);
const GRANTS = 'postV2UsersUser-idRights';
const REVOKES = 'patchV2UsersUser-idRights';
const CREATES_USER = 'postV2Users';

const NO_COMMANDS: CommandPart = {
  source: 'none',
  commands: NONE,
  unreadable: 0,
  actAs: NONE,
  readAs: NONE,
  submitter: NONE,
  userId: '',
  disclosedContracts: NONE,
};

const PREPARED_UNRECORDED: CommandPart = { ...NO_COMMANDS, source: 'prepared' };
const UNREAD_PREPARED: CommandPart = { ...PREPARED_UNRECORDED, unreadable: 1 };

/** What the call commands: JsCommands (submissions, prepare), reassignments, or the prepared transaction. */
function commandPart(input: CallInput, body: Json): CommandPart {
  const { operation } = input;
  if (operation === 'submitAndWaitForTransaction' && isObject(body.commands)) return jsCommandsPart(body.commands);
  if (SUBMISSIONS_OF_JS_COMMANDS.has(operation) || operation === SubmissionOperations.prepare)
    return jsCommandsPart(body);
  if (isObject(body.reassignmentCommands)) return reassignmentPart(body.reassignmentCommands);
  if (EXECUTES.has(operation)) {
    const prepared = input.prepared;
    if (prepared === undefined) return input.preparedUnrecorded === true ? PREPARED_UNRECORDED : UNREAD_PREPARED;
    return { ...PREPARED_UNRECORDED, commands: prepared.commands, actAs: prepared.actAs, userId: text(body.userId) };
  }
  return NO_COMMANDS;
}

function packagesOf(operation: string, body: Json): PackageFacts[] {
  if (UPLOADS.has(operation)) return [UPLOADED_ARCHIVE];
  if (operation === 'updateVettedPackages') return vettedPackagesOf(body);
  return NONE;
}

function rightsOfCall(operation: string, body: Json): RightFacts[] {
  if (operation === GRANTS) return rightsOf(body, 'grant');
  if (operation === REVOKES) return rightsOf(body, 'revoke');
  if (operation === CREATES_USER) return rightsOf(body, 'create');
  return NONE;
}

/** The party a party or rights call is about: the path's, the body's, each right's. */
function subjectsOf(input: CallInput, body: Json, rights: readonly RightFacts[]): string[] {
  const subjects: string[] = [];
  const pathParty = input.pathParameters?.party;
  if (pathParty !== undefined) addUnique(subjects, [pathParty]);
  addUnique(subjects, partySubjects(body));
  for (const right of rights) addUnique(subjects, [right.party]);
  return subjects;
}

/** Every party of the call: what `parties` rules hold against. */
function allParties(lists: readonly (readonly string[])[]): string[] {
  const all: string[] = [];
  for (const list of lists) addUnique(all, list);
  return all;
}

function countMalformedTemplates(commands: readonly CommandFacts[]): number {
  let malformed = 0;
  for (const command of commands)
    if (command.template === undefined && command.kind !== 'AssignCommand' && command.kind !== 'UnassignCommand')
      malformed++;
  return malformed;
}

/** The principal with the call's user id (its commands', else its body's, else the token's). */
function principalOfCall(input: CallInput, part: CommandPart, body: Json): PrincipalFacts {
  const userId = part.userId || text(body.userId) || input.principal.userId;
  return userId === input.principal.userId ? input.principal : { ...input.principal, userId };
}

/**
 * A call's decision document. What the rules read of every call (its operation, commands and whether
 * any part is unreadable) is read at once; every other part the first time a rule, a condition or a
 * budget reads it, then kept: a policy whose rules name commands and actAs never builds the call's
 * rights, packages or target user, and a call nothing reads the read filters of never walks them.
 */
class CallDocument implements DecisionDocument {
  readonly operation: string;
  readonly writes: boolean;
  readonly commands: CommandFacts[];
  readonly commandSource: DecisionDocument['commandSource'];
  readonly unreadable: number;
  readonly #input: CallInput;
  readonly #body: Json;
  readonly #part: CommandPart;
  #principal: PrincipalFacts | undefined;
  #parties: PartyFacts | undefined;
  #read: ReadFacts | undefined | null = null; // null: not read yet
  #packages: PackageFacts[] | undefined;
  #rights: RightFacts[] | undefined;
  #targetUserId: string | undefined;

  constructor(input: CallInput) {
    const body: Json = isObject(input.body) ? input.body : {};
    const part = commandPart(input, body);
    this.operation = input.operation;
    this.writes = input.writes;
    this.commands = part.commands;
    this.commandSource = part.source;
    this.unreadable = part.unreadable + countMalformedTemplates(part.commands) + (input.prepared?.unreadable ?? 0);
    this.#input = input;
    this.#body = body;
    this.#part = part;
  }

  get principal(): PrincipalFacts {
    return (this.#principal ??= principalOfCall(this.#input, this.#part, this.#body));
  }

  get parties(): PartyFacts {
    return (this.#parties ??= new CallParties(this.#part, this));
  }

  /** The parties the call is about (CallParties.subjects). */
  subjectParties(): string[] {
    return subjectsOf(this.#input, this.#body, this.rights);
  }

  get disclosedContracts(): DecisionDocument['disclosedContracts'] {
    return this.#part.disclosedContracts;
  }

  get read(): ReadFacts | undefined {
    if (this.#read === null) this.#read = readFacts(this.#body);
    return this.#read;
  }

  get packages(): PackageFacts[] {
    return (this.#packages ??= packagesOf(this.operation, this.#body));
  }

  get rights(): RightFacts[] {
    return (this.#rights ??= rightsOfCall(this.operation, this.#body));
  }

  get targetUserId(): string {
    return (this.#targetUserId ??= targetUserOf(this.#body, this.#input.pathParameters?.userId ?? ''));
  }
}

export function decisionDocument(input: CallInput): DecisionDocument {
  return new CallDocument(input);
}

/** The document as plain data, every part read: what crosses to another thread, which copies no getter. */
export function plainDocument(document: DecisionDocument): DecisionDocument {
  const { parties } = document;
  return {
    operation: document.operation,
    writes: document.writes,
    principal: document.principal,
    parties: {
      actAs: parties.actAs,
      readAs: parties.readAs,
      submitter: parties.submitter,
      subjects: parties.subjects,
      all: parties.all,
    },
    commands: document.commands,
    disclosedContracts: document.disclosedContracts,
    read: document.read,
    packages: document.packages,
    rights: document.rights,
    targetUserId: document.targetUserId,
    commandSource: document.commandSource,
    unreadable: document.unreadable,
  };
}

/** A call's parties by role; the subjects and all of them found the first time a rule reads them. */
class CallParties implements PartyFacts {
  readonly actAs: string[];
  readonly readAs: string[];
  readonly submitter: string[];
  #subjects: string[] | undefined;
  #all: string[] | undefined;

  constructor(
    part: CommandPart,
    private readonly document: CallDocument,
  ) {
    this.actAs = unique(part.actAs);
    this.readAs = unique(part.readAs);
    this.submitter = unique(part.submitter);
  }

  get subjects(): string[] {
    return (this.#subjects ??= this.document.subjectParties());
  }

  get all(): string[] {
    return (this.#all ??= allParties([
      this.actAs,
      this.readAs,
      this.submitter,
      this.subjects,
      this.document.read?.parties ?? NO_PARTIES,
    ]));
  }
}

const NO_PARTIES: readonly string[] = [];

/** The principal part, from the verified token and the connection. */
export function principalFacts(
  principal: {
    readonly subject: string;
    readonly issuer: string | undefined;
    readonly claims: Readonly<Record<string, unknown>>;
  },
  connection: {
    readonly clientAddress: string;
    readonly certificateSubject?: string;
    readonly certificateDnsNames?: readonly string[];
    readonly consumer?: string;
  },
): PrincipalFacts {
  return {
    issuer: principal.issuer ?? '',
    subject: principal.subject,
    userId: principal.subject,
    claims: principal.claims,
    certificateSubject: connection.certificateSubject ?? '',
    certificateDnsNames: connection.certificateDnsNames ?? [],
    clientAddress: connection.clientAddress,
    consumer: connection.consumer ?? '',
  };
}

const NO_PATH_PARAMETERS: { readonly party?: string; readonly userId?: string } = Object.freeze({});

/** A path segment decoded; one with a malformed escape stays as written (the participant will refuse it). */
function decodedSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/** The `{party}` and `{user-id}` of a path, by its operation's template. */
export function pathParameters(template: string, path: string): { party?: string; userId?: string } {
  if (!template.includes('{')) return NO_PATH_PARAMETERS;
  const names = template.split('/');
  const values = pathOf(path).split('/');
  const found: { party?: string; userId?: string } = {};
  names.forEach((name, index) => {
    const value = values[index] === undefined ? undefined : decodedSegment(values[index]);
    if (name === '{party}' && value !== undefined) found.party = value;
    if (name === '{user-id}' && value !== undefined) found.userId = value;
  });
  return found;
}
