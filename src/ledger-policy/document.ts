// The decision document: what one call would do to the ledger, built once from what it carries, and
// the only thing the rules read. Field names are Canton's (JSON Ledger API v2, openapi.yaml: JsCommands,
// Command, EventFormat, Right, VettedPackagesRef) wherever Canton has one; docs/ledger-policy.md
// describes every field.

/** A Daml template (or interface) identifier, `<package>:<module>:<entity>`, split. */
export interface TemplateRef {
  /** As the call wrote it: `<package-id>:<module>:<entity>` or `#<package-name>:<module>:<entity>`. */
  readonly templateId: string;
  /** The package id, when the call named one ('' for a `#name` reference). */
  readonly packageId: string;
  /** The package name: from a `#name` reference, a prepared transaction's node, or resolved from the id ('' until then). */
  packageName: string;
  readonly moduleName: string;
  readonly entityName: string;
}

export type CommandKind =
  | 'CreateCommand'
  | 'ExerciseCommand'
  | 'CreateAndExerciseCommand'
  | 'ExerciseByKeyCommand'
  | 'AssignCommand'
  | 'UnassignCommand'
  | 'FetchNode';

/** One command of a submission or prepare, or one root node of a prepared transaction at execute. */
export interface CommandFacts {
  readonly kind: CommandKind;
  /** Undefined for a reassignment, which names no template. */
  readonly template: TemplateRef | undefined;
  /** '' for a create or a reassignment. */
  readonly choice: string;
  /** '' for a create (the contract does not exist yet). */
  readonly contractId: string;
  /** Canton's createArguments (JSON API form; a prepared transaction's record fields by label). */
  readonly createArguments: unknown;
  /** Canton's choiceArgument. */
  readonly choiceArgument: unknown;
  /** Canton's contractKey (ExerciseByKeyCommand). */
  readonly contractKey: unknown;
  /** For a reassignment: the source and target synchronizers. */
  readonly source: string;
  readonly target: string;
}

/** A read's event format: whose events, and which templates (EventFormat, TransactionFilter). */
export interface ReadFacts {
  /** The parties of filtersByParty, requestingParties, a completion stream's parties. */
  readonly parties: string[];
  /** filtersForAnyParty is set: every party's events. */
  anyParty: boolean;
  /** Some filter takes every template (an empty cumulative list or a WildcardFilter). */
  wildcard: boolean;
  readonly templates: TemplateRef[];
  readonly interfaces: TemplateRef[];
}

export type PackageChange = 'upload' | 'vet' | 'unvet';

/** A package uploaded (postV2Dars, postV2Packages) or vetted/unvetted (updateVettedPackages). */
export interface PackageFacts {
  readonly change: PackageChange;
  /** '' when the call does not name it (an uploaded archive is not opened; a ref may name only one of the two). */
  readonly packageId: string;
  /** Resolved from the id when a rule needs it and the call named only the id. */
  packageName: string;
  readonly packageVersion: string;
}

export type RightChange = 'grant' | 'revoke' | 'create';

/** A user right granted or revoked (Canton's Right.kind variants: CanActAs, CanReadAs, ParticipantAdmin, ...). */
export interface RightFacts {
  readonly change: RightChange;
  readonly kind: string;
  /** The right's party ('' for a right without one). */
  readonly party: string;
  readonly identityProviderId: string;
}

/** Who calls: from the verified token and the connection, never from a header a client sets. */
export interface PrincipalFacts {
  readonly issuer: string;
  /** The token's `sub`. */
  readonly subject: string;
  /** The Ledger API user id the call acts for (the body's userId, else the token's). */
  readonly userId: string;
  readonly claims: Readonly<Record<string, unknown>>;
  /** The verified client certificate's subject (RFC 4514, e.g. CN=ops,O=Example), '' without one. */
  readonly certificateSubject: string;
  readonly certificateDnsNames: readonly string[];
  /** The client address, resolved through server.trustedProxies. */
  readonly clientAddress: string;
  /** The API consumer's name, where consumer keys exist ('' until then). */
  readonly consumer: string;
}

/** The parties a call names, by role. */
export interface PartyFacts {
  /** Canton's actAs (commands; a prepared transaction's submitters at execute). */
  readonly actAs: string[];
  readonly readAs: string[];
  /** A reassignment's submitter. */
  readonly submitter: string[];
  /** The party a party or rights call is about (allocation hint, the party of a right, a party path). */
  readonly subjects: string[];
  /** Every party above and every party a read asks for: what `parties` rules hold against. */
  readonly all: string[];
}

export interface DecisionDocument {
  /** The operation name (src/operations.ts), e.g. submitAndWaitForTransaction, postV2Parties. */
  readonly operation: string;
  /** Whether the operation can change the ledger or the participant (operations.ts `writes`). */
  readonly writes: boolean;
  readonly principal: PrincipalFacts;
  readonly parties: PartyFacts;
  readonly commands: CommandFacts[];
  readonly disclosedContracts: { readonly template: TemplateRef | undefined; readonly contractId: string }[];
  /** Undefined for a call that reads no events. */
  readonly read: ReadFacts | undefined;
  readonly packages: PackageFacts[];
  readonly rights: RightFacts[];
  /** The user a user or rights call is about ('' otherwise). */
  readonly targetUserId: string;
  /** Where the commands came from: the call's JSON, or the prepared transaction it executes. */
  readonly commandSource: 'json' | 'prepared' | 'none';
  /**
   * How many parts of the call the gateway could not read (a command of an unknown variant, a template
   * id not of the form package:module:entity, a prepared transaction that does not decode): a call with
   * any is denied to a principal a policy names (fail closed), whatever the rules say.
   */
  readonly unreadable: number;
}

/**
 * `<package>:<module>:<entity>` split (the form Canton's JSON decoder accepts, `JsonV2Tests`);
 * undefined for anything else. A `#` package is a package name, any other a package id.
 */
export function templateRef(templateId: unknown): TemplateRef | undefined {
  if (typeof templateId !== 'string') return undefined;
  // Two colons, none at either end or side by side: three non-empty parts (without split's list).
  const first = templateId.indexOf(':');
  const second = templateId.indexOf(':', first + 1);
  if (first < 1 || second <= first + 1 || second === templateId.length - 1 || templateId.includes(':', second + 1))
    return undefined;
  const pkg = templateId.slice(0, first);
  const moduleName = templateId.slice(first + 1, second);
  const entityName = templateId.slice(second + 1);
  const byName = pkg.startsWith('#');
  return {
    templateId,
    packageId: byName ? '' : pkg,
    packageName: byName ? pkg.slice(1) : '',
    moduleName,
    entityName,
  };
}

/** Every template a document names (commands, disclosed contracts, read filters): what package names resolve. */
export function templatesOf(document: DecisionDocument): TemplateRef[] {
  const templates: TemplateRef[] = [];
  for (const command of document.commands) if (command.template !== undefined) templates.push(command.template);
  for (const disclosed of document.disclosedContracts)
    if (disclosed.template !== undefined) templates.push(disclosed.template);
  if (document.read !== undefined) templates.push(...document.read.templates, ...document.read.interfaces);
  return templates;
}
