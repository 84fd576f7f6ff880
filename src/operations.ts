// The route catalogue: method + path template -> operation name.
// Every HTTP operation and WebSocket channel of Canton 3.4.12, 3.5.1, 3.5.10 and 3.6 (Canton's OpenAPI
// and AsyncAPI documents, served at /docs/openapi and /docs/asyncapi; 3.4/3.5 vendored in spec/canton/,
// 3.6 listed by hand in test/operations.test.ts). The five
// operations the product names carry their own names; every other route is named by Canton's operationId.

export type OperationKind = 'http' | 'websocket';

export interface Operation {
  /** Label for metrics, logs and policy; bounded by this catalogue. */
  readonly name: string;
  readonly method: string;
  readonly template: string;
  readonly kind: OperationKind;
  /** The participant's own /livez, /readyz and /docs: hidden unless configured (Canton `JsHealthService.scala`). */
  readonly participantInternal: boolean;
  /**
   * The call can change the ledger or the participant's configuration (commands, packages, vetting,
   * parties, users and rights, identity providers): the audit trail records it (src/audit/).
   */
  readonly writes: boolean;
}

type RouteEntry = readonly [method: string, template: string, name: string];

/** The five operations the product specification names. */
export const NamedOperations = {
  updateVettedPackages: 'updateVettedPackages',
  submitAndWaitForTransaction: 'submitAndWaitForTransaction',
  getVersion: 'getVersion',
  getUpdateByOffset: 'getUpdateByOffset',
  updateIdentityProviderConfig: 'updateIdentityProviderConfig',
} as const;

/** The other routes that carry a submission's userId (their policy rule checks it), by Canton's operationId. */
export const SubmissionOperations = {
  submitAndWait: 'postV2CommandsSubmit-and-wait',
  submitAndWaitForReassignment: 'postV2CommandsSubmit-and-wait-for-reassignment',
  submitAndWaitForTransactionTree: 'postV2CommandsSubmit-and-wait-for-transaction-tree',
  asyncSubmit: 'postV2CommandsAsyncSubmit',
  asyncSubmitReassignment: 'postV2CommandsAsyncSubmit-reassignment',
  prepare: 'postV2Interactive-submissionPrepare',
  execute: 'postV2Interactive-submissionExecute',
  executeAndWait: 'postV2Interactive-submissionExecuteandwait',
  executeAndWaitForTransaction: 'postV2Interactive-submissionExecuteandwaitfortransaction',
} as const;

/**
 * The operations that change the ledger or the participant's configuration, from Canton's OpenAPI
 * (every POST/PATCH/DELETE but the queries served as POST: completions, updates, state, events,
 * contract lookups, the DAR validation, preferred packages, the external party topology generation).
 */
export const WRITE_OPERATION_NAMES: ReadonlySet<string> = new Set([
  ...Object.values(SubmissionOperations),
  NamedOperations.submitAndWaitForTransaction,
  NamedOperations.updateVettedPackages,
  NamedOperations.updateIdentityProviderConfig,
  'postV2Dars',
  'postV2Packages',
  'postV2Parties',
  'postV2PartiesExternalAllocate',
  'patchV2PartiesParty',
  'postV2Users',
  'deleteV2UsersUser-id',
  'patchV2UsersUser-id',
  'postV2UsersUser-idRights',
  'patchV2UsersUser-idRights',
  'patchV2UsersUser-idIdentity-provider-id',
  'postV2Idps',
  'deleteV2IdpsIdp-id',
  // Sets a party's traffic budget on the synchronizer (Canton `JsTrafficService.scala`, 3.5.10 and later).
  'postV2TrafficAccounts',
]);

const HTTP_ROUTES: readonly RouteEntry[] = [
  ['POST', '/v2/commands/submit-and-wait', SubmissionOperations.submitAndWait],
  ['POST', '/v2/commands/submit-and-wait-for-transaction', NamedOperations.submitAndWaitForTransaction],
  ['POST', '/v2/commands/submit-and-wait-for-reassignment', SubmissionOperations.submitAndWaitForReassignment],
  ['POST', '/v2/commands/submit-and-wait-for-transaction-tree', SubmissionOperations.submitAndWaitForTransactionTree],
  ['POST', '/v2/commands/async/submit', SubmissionOperations.asyncSubmit],
  ['POST', '/v2/commands/async/submit-reassignment', SubmissionOperations.asyncSubmitReassignment],
  ['POST', '/v2/commands/completions', 'postV2CommandsCompletions'],
  ['POST', '/v2/commands/command-completions', 'postV2CommandsCommand-completions'],
  ['POST', '/v2/commands/completion-by-hash', 'postV2CommandsCompletion-by-hash'],
  ['POST', '/v2/events/events-by-contract-id', 'postV2EventsEvents-by-contract-id'],
  ['GET', '/v2/version', NamedOperations.getVersion],
  ['POST', '/v2/dars/validate', 'postV2DarsValidate'],
  ['POST', '/v2/dars', 'postV2Dars'],
  ['GET', '/v2/packages', 'getV2Packages'],
  ['POST', '/v2/packages', 'postV2Packages'],
  ['GET', '/v2/packages/{package-id}', 'getV2PackagesPackage-id'],
  ['GET', '/v2/packages/{package-id}/status', 'getV2PackagesPackage-idStatus'],
  ['GET', '/v2/package-vetting', 'getV2Package-vetting'],
  ['POST', '/v2/package-vetting', NamedOperations.updateVettedPackages],
  ['POST', '/v2/package-vetting/list', 'postV2Package-vettingList'],
  ['POST', '/v2/package-vetting/update', NamedOperations.updateVettedPackages],
  ['GET', '/v2/parties', 'getV2Parties'],
  ['POST', '/v2/parties', 'postV2Parties'],
  ['POST', '/v2/parties/external/allocate', 'postV2PartiesExternalAllocate'],
  ['GET', '/v2/parties/participant-id', 'getV2PartiesParticipant-id'],
  ['GET', '/v2/parties/{party}', 'getV2PartiesParty'],
  ['PATCH', '/v2/parties/{party}', 'patchV2PartiesParty'],
  ['POST', '/v2/parties/external/generate-topology', 'postV2PartiesExternalGenerate-topology'],
  ['POST', '/v2/state/active-contracts', 'postV2StateActive-contracts'],
  ['GET', '/v2/state/active-contracts-page', 'getV2StateActive-contracts-page'],
  ['POST', '/v2/state/active-contracts-page', 'postV2StateActive-contracts-page'],
  ['GET', '/v2/state/connected-synchronizers', 'getV2StateConnected-synchronizers'],
  ['GET', '/v2/state/ledger-end', 'getV2StateLedger-end'],
  ['GET', '/v2/state/latest-pruned-offsets', 'getV2StateLatest-pruned-offsets'],
  ['POST', '/v2/updates', 'postV2Updates'],
  ['POST', '/v2/updates/flats', 'postV2UpdatesFlats'],
  ['POST', '/v2/updates/trees', 'postV2UpdatesTrees'],
  ['GET', '/v2/updates/transaction-tree-by-offset/{offset}', 'getV2UpdatesTransaction-tree-by-offsetOffset'],
  ['POST', '/v2/updates/transaction-by-offset', 'postV2UpdatesTransaction-by-offset'],
  ['POST', '/v2/updates/update-by-offset', NamedOperations.getUpdateByOffset],
  ['POST', '/v2/updates/transaction-by-id', 'postV2UpdatesTransaction-by-id'],
  ['POST', '/v2/updates/update-by-id', 'postV2UpdatesUpdate-by-id'],
  ['POST', '/v2/updates/update-by-hash', 'postV2UpdatesUpdate-by-hash'],
  ['GET', '/v2/updates/transaction-tree-by-id/{update-id}', 'getV2UpdatesTransaction-tree-by-idUpdate-id'],
  ['POST', '/v2/updates/get-updates-page', 'postV2UpdatesGet-updates-page'],
  ['GET', '/v2/users', 'getV2Users'],
  ['POST', '/v2/users', 'postV2Users'],
  ['GET', '/v2/users/{user-id}', 'getV2UsersUser-id'],
  ['DELETE', '/v2/users/{user-id}', 'deleteV2UsersUser-id'],
  ['PATCH', '/v2/users/{user-id}', 'patchV2UsersUser-id'],
  ['GET', '/v2/authenticated-user', 'getV2Authenticated-user'],
  ['GET', '/v2/users/{user-id}/rights', 'getV2UsersUser-idRights'],
  ['POST', '/v2/users/{user-id}/rights', 'postV2UsersUser-idRights'],
  ['PATCH', '/v2/users/{user-id}/rights', 'patchV2UsersUser-idRights'],
  ['PATCH', '/v2/users/{user-id}/identity-provider-id', 'patchV2UsersUser-idIdentity-provider-id'],
  ['GET', '/v2/idps', 'getV2Idps'],
  ['POST', '/v2/idps', 'postV2Idps'],
  ['GET', '/v2/idps/{idp-id}', 'getV2IdpsIdp-id'],
  ['DELETE', '/v2/idps/{idp-id}', 'deleteV2IdpsIdp-id'],
  ['PATCH', '/v2/idps/{idp-id}', NamedOperations.updateIdentityProviderConfig],
  ['POST', '/v2/interactive-submission/prepare', SubmissionOperations.prepare],
  ['POST', '/v2/interactive-submission/execute', SubmissionOperations.execute],
  ['POST', '/v2/interactive-submission/executeAndWait', SubmissionOperations.executeAndWait],
  [
    'POST',
    '/v2/interactive-submission/executeAndWaitForTransaction',
    SubmissionOperations.executeAndWaitForTransaction,
  ],
  [
    'GET',
    '/v2/interactive-submission/preferred-package-version',
    'getV2Interactive-submissionPreferred-package-version',
  ],
  ['POST', '/v2/interactive-submission/preferred-packages', 'postV2Interactive-submissionPreferred-packages'],
  ['POST', '/v2/contracts/contract-by-id', 'postV2ContractsContract-by-id'],
  // 3.6: a party's keys for party-signed tokens (experimental; Canton `JsJoseService.scala`).
  ['GET', '/v2/jose/jwks/synchronizer/{synchronizer}/party/{party}', 'getV2JoseJwks'],
  // Served by Canton but not in its spec (routes.json "extra"): pass through, named like the rest.
  ['GET', '/v2/definitions/packages/{package-signature}', 'getV2DefinitionsPackagesPackage-signature'],
  ['GET', '/v2/definitions/templates', 'getV2DefinitionsTemplates'],
  ['GET', '/v2/definitions/templates/{template-id}', 'getV2DefinitionsTemplatesTemplate-id'],
  ['GET', '/v2/traffic/accounts/{account-id}', 'getV2TrafficAccountsAccount-id'],
  ['POST', '/v2/traffic/accounts', 'postV2TrafficAccounts'],
];

/** The participant's own endpoints outside /v2: hidden unless `routes.exposeParticipantHealth/Docs`. */
const PARTICIPANT_INTERNAL_ROUTES: readonly RouteEntry[] = [
  ['GET', '/livez', 'getLivez'],
  ['GET', '/readyz', 'getReadyz'],
  ['GET', '/docs/openapi', 'getDocsOpenapi'],
  ['GET', '/docs/asyncapi', 'getDocsAsyncapi'],
];

/** WebSocket channels: GET + Upgrade on the path of the POST list variant (Canton's AsyncAPI). */
const WEBSOCKET_ROUTES: readonly RouteEntry[] = [
  ['GET', '/v2/commands/completions', 'onV2CommandsCompletions'],
  ['GET', '/v2/commands/command-completions', 'onV2CommandsCommand-completions'],
  ['GET', '/v2/state/active-contracts', 'onV2StateActive-contracts'],
  ['GET', '/v2/updates', 'onV2Updates'],
  ['GET', '/v2/updates/flats', 'onV2UpdatesFlats'],
  ['GET', '/v2/updates/trees', 'onV2UpdatesTrees'],
];

export const UNKNOWN_OPERATION: Operation = Object.freeze({
  name: 'unknown',
  method: '*',
  template: '/v2/*',
  kind: 'http',
  participantInternal: false,
  writes: false,
});

function toOperation(
  [method, template, name]: RouteEntry,
  kind: OperationKind,
  participantInternal = false,
): Operation {
  const writes = kind === 'http' && WRITE_OPERATION_NAMES.has(name);
  return Object.freeze({ name, method, template, kind, participantInternal, writes });
}

export const HTTP_OPERATIONS: readonly Operation[] = HTTP_ROUTES.map((r) => toOperation(r, 'http'));
export const WEBSOCKET_OPERATIONS: readonly Operation[] = WEBSOCKET_ROUTES.map((r) => toOperation(r, 'websocket'));
export const PARTICIPANT_INTERNAL_OPERATIONS: readonly Operation[] = PARTICIPANT_INTERNAL_ROUTES.map((r) =>
  toOperation(r, 'http', true),
);

/** Every operation name the gateway can label a request with (bounded metric cardinality). */
export const OPERATION_NAMES: readonly string[] = [
  ...new Set([...HTTP_OPERATIONS, ...WEBSOCKET_OPERATIONS, ...PARTICIPANT_INTERNAL_OPERATIONS].map((o) => o.name)),
  UNKNOWN_OPERATION.name,
];

interface TemplateMatcher {
  readonly segments: readonly (string | null)[]; // null = a {param} segment
  readonly operation: Operation;
}

/**
 * Matches raw (still percent-encoded) request paths. One matcher serves plain requests and
 * WebSocket upgrades alike. Static paths are one Map lookup; templated ones compare segments,
 * where a parameter matches any one non-empty segment (an encoded slash stays inside it).
 */
class OperationMatcher {
  /** By method, then path: no key string is built per request. */
  private readonly exact = new Map<string, Map<string, Operation>>();
  private readonly templated = new Map<string, TemplateMatcher[]>();

  constructor(operations: readonly Operation[]) {
    for (const operation of operations) {
      if (operation.template.includes('{')) {
        const segments = operation.template.split('/').map((s) => (s.startsWith('{') ? null : s));
        const list = this.templated.get(operation.method) ?? [];
        list.push({ segments, operation });
        this.templated.set(operation.method, list);
      } else {
        const paths = this.exact.get(operation.method) ?? new Map<string, Operation>();
        paths.set(operation.template, operation);
        this.exact.set(operation.method, paths);
      }
    }
  }

  match(method: string, path: string): Operation | undefined {
    const exact = this.exact.get(method)?.get(path);
    if (exact !== undefined) return exact;
    const candidates = this.templated.get(method);
    if (candidates === undefined) return undefined;
    const segments = path.split('/');
    for (const candidate of candidates) {
      if (candidate.segments.length !== segments.length) continue;
      let matched = true;
      for (let i = 0; i < segments.length; i++) {
        const expected = candidate.segments[i];
        const actual = segments[i]!;
        if (expected === null ? actual.length === 0 : expected !== actual) {
          matched = false;
          break;
        }
      }
      if (matched) return candidate.operation;
    }
    return undefined;
  }
}

const httpMatcher = new OperationMatcher([...HTTP_OPERATIONS, ...PARTICIPANT_INTERNAL_OPERATIONS]);
const websocketMatcher = new OperationMatcher(WEBSOCKET_OPERATIONS);

/** The path part of a request target, without the query string. */
export function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

const ENCODED_UNRESERVED = /%(2[DdEe]|3\d|[46][1-9A-Fa-f]|[57][0-9Aa]|5[Ff]|7[Ee])/g;

/**
 * The path as the participant will understand it, for matching only (the raw path is what is
 * forwarded): percent-encoded unreserved characters decoded (RFC 3986 §6.2.2.2: `%74` is `t`, so
 * `/v2/updates/update-by-offse%74` is update-by-offset and gets its rules), and one trailing slash
 * ignored. Encoded reserved characters (`%2F`) stay encoded: they never split a segment.
 */
export function canonicalPath(path: string): string {
  let canonical = path.includes('%')
    ? path.replace(ENCODED_UNRESERVED, (match) => String.fromCharCode(parseInt(match.slice(1), 16)))
    : path;
  if (canonical.length > 1 && canonical.endsWith('/')) canonical = canonical.slice(0, -1);
  return canonical;
}

/**
 * The operation of a plain HTTP request. `path` is the raw path without query.
 * Unknown paths under /v2 are `unknown`; anything else outside /v2 is undefined (not served).
 */
export function matchOperation(method: string, rawPath: string): Operation | undefined {
  const path = canonicalPath(rawPath);
  const found = httpMatcher.match(method, path);
  if (found !== undefined) return found;
  return path.startsWith('/v2/') || path === '/v2' ? UNKNOWN_OPERATION : undefined;
}

/** The operation of a WebSocket upgrade (always GET), or undefined when not a known channel. */
export function matchWebSocketOperation(rawPath: string): Operation | undefined {
  return websocketMatcher.match('GET', canonicalPath(rawPath));
}
