// The one catalogue of errors the gateway raises itself, rendered in Canton's JsCantonError shape.
// Canton: `JsSchema.scala` (body), `GrpcHttpErrorCodes.scala` (gRPC code -> HTTP status), `ErrorCategory.scala` and
// `RequestValidationErrors.scala` (codes, categories).

/** gRPC status codes (https://grpc.github.io/grpc/core/md_doc_statuscodes.html). */
export const GrpcCode = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;
export type GrpcCodeValue = (typeof GrpcCode)[keyof typeof GrpcCode];

/** HTTP status for a gRPC code, exactly as Canton's GrpcHttpErrorCodes.asPekkoHttp. */
export function httpStatusForGrpcCode(grpc: number | null | undefined): number {
  switch (grpc) {
    case GrpcCode.OK:
      return 200;
    case GrpcCode.INVALID_ARGUMENT:
    case GrpcCode.FAILED_PRECONDITION:
    case GrpcCode.OUT_OF_RANGE:
      return 400;
    case GrpcCode.UNAUTHENTICATED:
      return 401;
    case GrpcCode.PERMISSION_DENIED:
      return 403;
    case GrpcCode.NOT_FOUND:
      return 404;
    case GrpcCode.ABORTED:
    case GrpcCode.ALREADY_EXISTS:
      return 409;
    case GrpcCode.RESOURCE_EXHAUSTED:
      return 429;
    case GrpcCode.CANCELLED:
      return 499;
    case GrpcCode.UNIMPLEMENTED:
      return 501;
    case GrpcCode.UNAVAILABLE:
      return 503;
    case GrpcCode.DEADLINE_EXCEEDED:
      return 504;
    default:
      return 500; // UNKNOWN, INTERNAL, DATA_LOSS, missing
  }
}

/** Canton's JsCantonError: all ten keys, null where absent (`JsSchema.scala`). */
export interface JsCantonError {
  code: string;
  cause: string;
  correlationId: string | null;
  traceId: string | null;
  context: Record<string, string>;
  resources: Array<[string, string]>;
  errorCategory: number;
  grpcCodeValue: number | null;
  retryInfo: string | null;
  definiteAnswer: boolean | null;
}

export interface ErrorDefinition {
  /** The code counted in metrics and logged; on the wire too unless `redacted`. */
  readonly code: string;
  /** Canton error category (1..14). */
  readonly category: number;
  readonly grpc: GrpcCodeValue;
  /** HTTP status: derived from `grpc`, except where Canton itself overrides it (its 413 list limit). */
  readonly status: number;
  /** Canton redacts security errors to code "NA", category -1 (`DecodedCantonError.scala` redactedError). */
  readonly redacted: boolean;
  /** Scala duration text for the retryable categories 1, 2, 3 and 12. */
  readonly retryInfo: string | null;
  /** What the error table in docs/errors-and-metrics.md says about it. */
  readonly description: string;
  /**
   * Answered as Canton's JSON layer answers a body it cannot decode (tapir): 400 text/plain
   * "Invalid value for: body (<cause>)", not a JsCantonError (Canton `V2Routes.scala`).
   */
  readonly plainText: boolean;
  /**
   * Answered as Canton's JSON API answers a path it does not serve: 404 with its legacy v1 body
   * `{"errors":["<METHOD>, uri: <uri>"],"status":404}` (`EndpointsCompanion.scala` notFound), not a JsCantonError.
   */
  readonly routeNotFound: boolean;
}

const RETRYABLE_CATEGORIES = new Set([1, 2, 3, 12]);

function defineError(
  code: string,
  category: number,
  grpc: GrpcCodeValue,
  description: string,
  options: { status?: number; redacted?: boolean; plainText?: boolean; routeNotFound?: boolean } = {},
): ErrorDefinition {
  return Object.freeze({
    code,
    category,
    grpc,
    status: options.status ?? httpStatusForGrpcCode(grpc),
    redacted: options.redacted ?? false,
    plainText: options.plainText ?? false,
    routeNotFound: options.routeNotFound ?? false,
    retryInfo: RETRYABLE_CATEGORIES.has(category) ? '1 second' : null,
    description,
  });
}

export const Errors = {
  UNAUTHENTICATED: defineError(
    'UNAUTHENTICATED',
    6,
    GrpcCode.UNAUTHENTICATED,
    'No valid bearer token: missing, malformed, expired, bad signature, unknown issuer or key, wrong audience or scope, lifetime over the limit, or the key set is unavailable. Sent redacted, as Canton does: code NA, category -1.',
    { redacted: true },
  ),
  PERMISSION_DENIED: defineError(
    'PERMISSION_DENIED',
    7,
    GrpcCode.PERMISSION_DENIED,
    'The token is valid but no authorization rule allows this operation, or the body names another user. Sent redacted: code NA, category -1.',
    { redacted: true },
  ),
  INVALID_ARGUMENT: defineError(
    'INVALID_ARGUMENT',
    8,
    GrpcCode.INVALID_ARGUMENT,
    'The request has invalid arguments (e.g. the idp-id in the path does not match the body), as Canton answers.',
  ),
  MISSING_FIELD: defineError(
    'MISSING_FIELD',
    8,
    GrpcCode.INVALID_ARGUMENT,
    'A mandatory field is missing (context.field_name names it), as Canton answers.',
  ),
  INVALID_FIELD: defineError(
    'INVALID_FIELD',
    8,
    GrpcCode.INVALID_ARGUMENT,
    'A field has an invalid value, as Canton answers.',
  ),
  NON_POSITIVE_OFFSET: defineError(
    'NON_POSITIVE_OFFSET',
    8,
    GrpcCode.INVALID_ARGUMENT,
    'An offset that must be positive is zero, negative or absent, as Canton answers.',
  ),
  PROTO_DESERIALIZATION_FAILURE: defineError(
    'PROTO_DESERIALIZATION_FAILURE',
    8,
    GrpcCode.INVALID_ARGUMENT,
    'A oneof is Empty or missing, or a topology serial is not positive, as Canton answers.',
  ),
  INVALID_IDENTITY_PROVIDER_UPDATE_REQUEST: defineError(
    'INVALID_IDENTITY_PROVIDER_UPDATE_REQUEST',
    8,
    GrpcCode.INVALID_ARGUMENT,
    'The identity provider update mask is empty, names an unknown field or repeats one, as Canton answers.',
  ),
  DECODE_FAILURE: defineError(
    'DECODE_FAILURE',
    8,
    GrpcCode.INVALID_ARGUMENT,
    "A body on a rule-checked route that the participant's JSON decoder refuses (not JSON, not an object, a wrong JSON type, a missing field of a strict type, an integer out of range, an unknown enum name or oneof variant, a malformed template id): answered as Canton answers it, 400 text/plain \"Invalid value for: body (... at '<path>')\", not a JsCantonError.",
    { plainText: true },
  ),
  GATEWAY_MALFORMED_REQUEST: defineError(
    'GATEWAY_MALFORMED_REQUEST',
    8,
    GrpcCode.INVALID_ARGUMENT,
    "A body on a rule-checked route could not be read whole (the client left, stopped sending or took longer than policy.bodyReadTimeoutMs) or is nested deeper than policy.maxBodyDepth; an HTTP/1.1 request without Host, a request with two Host lines or an HTTP/1.0 request with Transfer-Encoding (faulty framing: the connection is closed); Content-Type lines that declare different types (pekko-http refuses them too); a Connection header naming the credential's field (Authorization, or Sec-WebSocket-Protocol on an upgrade); or Fastify refused the request as malformed before any route.",
  ),
  GATEWAY_EXPECTATION_FAILED: defineError(
    'GATEWAY_EXPECTATION_FAILED',
    8,
    GrpcCode.INVALID_ARGUMENT,
    'The request carries an Expect header other than 100-continue, the only expectation HTTP defines (RFC 9110 §10.1.1); the connection is closed.',
    { status: 417 },
  ),
  GATEWAY_UNSUPPORTED_MEDIA_TYPE: defineError(
    'GATEWAY_UNSUPPORTED_MEDIA_TYPE',
    8,
    GrpcCode.INVALID_ARGUMENT,
    'A rule-checked route was sent a body in a charset the gateway cannot decode as the participant would (UTF-16, a charset Java does not know, or one TextDecoder reads otherwise than Java; UTF-8, US-ASCII, ISO-8859-1 to 8, 13, 15 and 16 and windows-1250 to 1258 but 1255 are read as Java reads them, byte for byte). Any content type is accepted otherwise, as Canton accepts it, an empty or unparseable one included (the body is then read as UTF-8, as pekko-http reads it).',
    { status: 415 },
  ),
  GATEWAY_REQUEST_TOO_LARGE: defineError(
    'GATEWAY_REQUEST_TOO_LARGE',
    8,
    GrpcCode.INVALID_ARGUMENT,
    "The request body is larger than limits.bodyBytes or, on a rule-checked route (its body is read whole and parsed), than policy.maxBodyBytes when set; or a rule-checked body's parsed tree needs more memory than a rule-check worker's heap (the body's shape, not the gateway's load: retrying will not help).",
    { status: 413 },
  ),
  GATEWAY_HEADERS_TOO_LARGE: defineError(
    'GATEWAY_HEADERS_TOO_LARGE',
    8,
    GrpcCode.INVALID_ARGUMENT,
    'The request line and headers are larger than server.maxHeaderBytes.',
    { status: 431 },
  ),
  GATEWAY_CLIENT_TIMEOUT: defineError(
    'GATEWAY_CLIENT_TIMEOUT',
    8,
    GrpcCode.INVALID_ARGUMENT,
    'The client did not send its request headers within server.headersTimeoutMs, or the whole request within server.requestTimeoutMs, or a forwarded body did not keep its pace (no bytes, or fewer than upstream.bodyMinBytesPerSecond, in a window of upstream.bodyIdleTimeoutMs): the connection is closed.',
    { status: 408 },
  ),
  GATEWAY_ROUTE_NOT_EXPOSED: defineError(
    'GATEWAY_ROUTE_NOT_EXPOSED',
    11,
    GrpcCode.NOT_FOUND,
    "The path is outside /v2 and not exposed by the gateway (the participant's /livez, /readyz and /docs are hidden unless configured).",
  ),
  GATEWAY_OUTSIDE_PATH_PREFIX: defineError(
    'GATEWAY_OUTSIDE_PATH_PREFIX',
    11,
    GrpcCode.NOT_FOUND,
    'The path is outside server.pathPrefix: answered as the participant answers a path it does not serve.',
    { routeNotFound: true },
  ),
  GATEWAY_INVALID_PATH: defineError(
    'GATEWAY_INVALID_PATH',
    8,
    GrpcCode.INVALID_ARGUMENT,
    'The request target is not a plain origin-form path (dot segments, encoded dot segments, backslashes, empty segments, a fragment, or absolute-form).',
  ),
  GATEWAY_SOURCE_NOT_ALLOWED: defineError(
    'GATEWAY_SOURCE_NOT_ALLOWED',
    7,
    GrpcCode.PERMISSION_DENIED,
    'A source rule (policy.sources) refuses the call whatever its token: its client address is denied or not allowed, or it has no verified client certificate with an accepted subject; context.source names which (address or certificate).',
  ),
  GATEWAY_LEDGER_POLICY_DENIED: defineError(
    'GATEWAY_LEDGER_POLICY_DENIED',
    7,
    GrpcCode.PERMISSION_DENIED,
    "A ledger policy (ledgerPolicy.policies) names the caller and refuses what the call would do: a deny rule touches it, no allow rule covers it (its parties, templates, choices, command kinds, packages or rights, a CEL condition, a time window), a template's package name cannot be resolved, or a part of the call cannot be read; context.policy and context.rule name the policy and the rule (default: no allow rule covers the call), never its conditions.",
  ),
  GATEWAY_PREPARED_TRANSACTION_UNREADABLE: defineError(
    'GATEWAY_PREPARED_TRANSACTION_UNREADABLE',
    8,
    GrpcCode.INVALID_ARGUMENT,
    "An execute call of a caller a ledger policy names carries a preparedTransaction that is not base64 of Canton's PreparedTransaction message, has no root node, nests a value deeper than ledgerPolicy.preparedTransactions.maxValueDepth or has more roots than maxRoots: the rules cannot be held against it, so it is not sent.",
  ),
  GATEWAY_LEDGER_POLICY_UNAVAILABLE: defineError(
    'GATEWAY_LEDGER_POLICY_UNAVAILABLE',
    1,
    GrpcCode.UNAVAILABLE,
    "The ledger policy could not decide in time: the prepared-transaction workers (which also read a governed caller's bodies over 1 MiB) are all busy with ledgerPolicy.preparedTransactions.maxQueue waiting, or a decode took longer than its timeoutMs. The call was not sent. Retry-After: 1.",
  ),
  GATEWAY_RESOURCE_EXHAUSTED: defineError(
    'GATEWAY_RESOURCE_EXHAUSTED',
    2,
    GrpcCode.RESOURCE_EXHAUSTED,
    'A rate limit or concurrency cap (protection.*) for this caller, this operation or the whole gateway is reached; context.limit names it, Retry-After says when to retry.',
  ),
  GATEWAY_UPLOAD_SHARE_EXHAUSTED: defineError(
    'GATEWAY_UPLOAD_SHARE_EXHAUSTED',
    2,
    GrpcCode.RESOURCE_EXHAUSTED,
    'This caller already has its share of the upstream connections (upstream.uploadShare) held by uploads streaming to the participant (bodies over upstream.bufferBodyBytes); Retry-After: 1.',
  ),
  GATEWAY_QUOTA_EXHAUSTED: defineError(
    'GATEWAY_QUOTA_EXHAUSTED',
    2,
    GrpcCode.RESOURCE_EXHAUSTED,
    "The consumer's quota of calls of this operation for the UTC day or month (consumers.list[].quotas) is spent; context.period names which (day or month), Retry-After says when it starts again, the RateLimit headers what is left.",
  ),
  GATEWAY_BUDGET_EXHAUSTED: defineError(
    'GATEWAY_BUDGET_EXHAUSTED',
    2,
    GrpcCode.RESOURCE_EXHAUSTED,
    "The call would pass the consumer's budget of the UTC day (consumers.list[].budgets: the sum of an amount its calls carry, e.g. the amount of its transfers); nothing was counted and the call was not sent. context.budget names it, context.remaining says what is left, Retry-After when the day starts again, the RateLimit headers what is left in units of 10^-scale.",
  ),
  GATEWAY_BUDGET_AMOUNT_INVALID: defineError(
    'GATEWAY_BUDGET_AMOUNT_INVALID',
    8,
    GrpcCode.INVALID_ARGUMENT,
    "The amount a consumer's budget reads from the call (consumers.list[].budgets[].amount) is not a decimal number, has more decimal places than the budget's scale, is negative, or could not be read from the call; the call was not sent and nothing was counted.",
  ),
  GATEWAY_UPSTREAM_TOKEN_UNAVAILABLE: defineError(
    'GATEWAY_UPSTREAM_TOKEN_UNAVAILABLE',
    1,
    GrpcCode.UNAVAILABLE,
    "The gateway could not obtain the consumer's brokered Canton token (its token endpoint was unreachable, slower than consumers.upstreamTokens.timeoutMs, or answered something else than a token) and holds none with consumers.upstreamTokens.minRemainingSeconds left; the call was not sent. Retry-After: 1.",
  ),
  GATEWAY_PROTECTION_UNAVAILABLE: defineError(
    'GATEWAY_PROTECTION_UNAVAILABLE',
    1,
    GrpcCode.UNAVAILABLE,
    'The shared limit store (protection.redis) cannot answer and protection.failMode is closed; the caller is not over a limit. Retry-After: 1.',
  ),
  GATEWAY_AUDIT_UNAVAILABLE: defineError(
    'GATEWAY_AUDIT_UNAVAILABLE',
    1,
    GrpcCode.UNAVAILABLE,
    'A ledger write was refused because its audit record could not be written (disk full, I/O error, the trail slower than audit.writeTimeoutMs) and audit.failMode is closed; it was not sent to the participant. Reads go on. Retry-After: 1.',
  ),
  GATEWAY_AUDIT_SHARE_EXHAUSTED: defineError(
    'GATEWAY_AUDIT_SHARE_EXHAUSTED',
    2,
    GrpcCode.RESOURCE_EXHAUSTED,
    "This caller's writes have added their share of the audit trail's bytes for now (audit.callerBytesPerMinute) and audit.failMode is closed; the write was not sent to the participant. Retry-After says when the share holds a write again.",
  ),
  GATEWAY_BODY_BUFFER_EXHAUSTED: defineError(
    'GATEWAY_BODY_BUFFER_EXHAUSTED',
    1,
    GrpcCode.UNAVAILABLE,
    'The request bodies the gateway holds in memory (rule-checked bodies, and bodies up to upstream.bufferBodyBytes) fill limits.bufferedBodyBytes; the caller is not over a limit. Retry-After: 1, the connection closed.',
  ),
  GATEWAY_RULE_CHECK_UNAVAILABLE: defineError(
    'GATEWAY_RULE_CHECK_UNAVAILABLE',
    1,
    GrpcCode.UNAVAILABLE,
    'A rule-checked body too large to judge on the event loop could not be judged in time: the rule-check workers are busy with 32 bodies waiting, the body waited or was judged longer than 20 s, or its worker stopped. The call was not sent. Retry-After: 1.',
  ),
  GATEWAY_UPSTREAM_UNAVAILABLE: defineError(
    'GATEWAY_UPSTREAM_UNAVAILABLE',
    1,
    GrpcCode.UNAVAILABLE,
    'The participant could not be reached (connection refused or reset, DNS failure, TLS failure) or the gateway is shutting down.',
  ),
  GATEWAY_UPSTREAM_TIMEOUT: defineError(
    'GATEWAY_UPSTREAM_TIMEOUT',
    3,
    GrpcCode.DEADLINE_EXCEEDED,
    "The participant did not answer within upstream.timeoutMs (or the operation's override).",
  ),
  GATEWAY_INTERNAL_ERROR: defineError(
    'GATEWAY_INTERNAL_ERROR',
    4,
    GrpcCode.INTERNAL,
    'An unexpected gateway failure. The body holds no internals; the log line with the same correlation id has the cause.',
  ),
} as const satisfies Record<string, ErrorDefinition>;

export type ErrorCode = keyof typeof Errors;

const REDACTED_CAUSE = 'A security-sensitive error has been received';

/**
 * Where Canton raises the error it mirrors, which decides two fields (Canton `JsSchema.scala`): the
 * gRPC Ledger API (`definiteAnswer` null; the context adds `category` and `tid`, and `definite_answer`
 * for Ledger API errors with a definite answer: RequestValidationErrors) or, when unset, the JSON
 * layer itself or the gateway (`definiteAnswer` false, the context as given).
 */
export type ErrorOrigin = 'grpc' | 'grpc-definite-answer';

export interface ErrorDetails {
  cause?: string;
  origin?: ErrorOrigin;
  correlationId?: string | null;
  traceId?: string | null;
  context?: Record<string, string>;
  resources?: Array<[string, string]>;
  /** For a retryable error: when to retry, as a Scala Duration text ("60 seconds"), instead of the default "1 second". */
  retryInfo?: string;
}

/** Scala's FiniteDuration text for whole seconds, as Canton prints retryInfo: "1 second", "60 seconds". */
export function secondsText(seconds: number): string {
  return seconds === 1 ? '1 second' : `${seconds} seconds`;
}

/** Render a catalogue error as the body Canton would send. */
export function renderCantonError(def: ErrorDefinition, details: ErrorDetails = {}): JsCantonError {
  if (def.redacted) {
    return {
      code: 'NA',
      cause: REDACTED_CAUSE,
      correlationId: details.correlationId ?? null,
      traceId: details.traceId ?? null,
      context: {},
      resources: [],
      errorCategory: -1,
      grpcCodeValue: def.grpc,
      retryInfo: null,
      definiteAnswer: null,
    };
  }
  const traceId = details.traceId ?? null;
  const fromGrpc = details.origin !== undefined;
  return {
    code: def.code,
    cause: details.cause ?? def.description,
    correlationId: details.correlationId ?? null,
    traceId,
    context: fromGrpc ? grpcContext(def, details, traceId) : (details.context ?? {}),
    resources: details.resources ?? [],
    errorCategory: def.category,
    grpcCodeValue: def.grpc,
    retryInfo: def.retryInfo === null ? null : (details.retryInfo ?? def.retryInfo),
    definiteAnswer: fromGrpc ? null : false,
  };
}

/** The ErrorInfo metadata Canton's JSON layer copies into `context` for a gRPC-originated error. */
function grpcContext(def: ErrorDefinition, details: ErrorDetails, traceId: string | null): Record<string, string> {
  const context: Record<string, string> = { ...details.context };
  if (details.origin === 'grpc-definite-answer') context.definite_answer = 'false';
  context.category = String(def.category);
  if (traceId !== null) context.tid = traceId;
  return context;
}

/** Canton's answer to a body its JSON decoder refuses (tapir's decode failure, Canton `V2Routes.scala`). */
export function renderDecodeFailure(details: ErrorDetails): string {
  return `Invalid value for: body (${details.cause ?? 'the body could not be decoded'})`;
}

/** A `routeNotFound` error's body: Canton's legacy v1 shape, `cause` the `<METHOD>, uri: <uri>` text. */
export function renderRouteNotFound(details: ErrorDetails): string {
  return JSON.stringify({ errors: [details.cause ?? 'not found'], status: 404 });
}

/** An error raised on the request path; the error handler renders it. */
export class GatewayError extends Error {
  readonly definition: ErrorDefinition;
  readonly details: ErrorDetails;
  /** Extra response headers (WWW-Authenticate, Retry-After). */
  readonly headers: Record<string, string>;
  /** Why, for the log line only: never sent to the client. */
  readonly reason: string | undefined;

  constructor(
    definition: ErrorDefinition,
    details: ErrorDetails = {},
    options: { headers?: Record<string, string>; reason?: string; cause?: unknown } = {},
  ) {
    super(details.cause ?? definition.code, { cause: options.cause });
    this.name = 'GatewayError';
    this.definition = definition;
    this.details = details;
    const headers = options.headers ?? {};
    // A 503 tells when to retry in the header as its body's retryInfo does ("1 second" unless the
    // raiser says otherwise), so that clients and proxies that read only HTTP (RFC 9110 §10.2.3)
    // wait as long as Canton-aware ones.
    const seconds =
      definition.status === 503 && definition.retryInfo !== null && headers['retry-after'] === undefined
        ? /^(\d+) seconds?$/.exec(details.retryInfo ?? definition.retryInfo)?.[1]
        : undefined;
    this.headers = seconds === undefined ? headers : { ...headers, 'retry-after': seconds };
    this.reason = options.reason;
  }
}

/** A request body over its limit; `limitKey` names the setting that sets it. */
export function requestTooLarge(limit: number, limitKey: string): GatewayError {
  const cause = `The request body is larger than ${limit} bytes (${limitKey}).`;
  return new GatewayError(Errors.GATEWAY_REQUEST_TOO_LARGE, { cause });
}

/** The same refusal, sent before the client's body was fully read: the connection cannot be reused (RFC 9112 §9.3). */
export function closingConnection(error: GatewayError): GatewayError {
  return new GatewayError(error.definition, error.details, {
    headers: { ...error.headers, connection: 'close' },
    reason: error.reason,
    cause: error.cause,
  });
}

// The error codes a request can end with other than the catalogue's own: the participant's codes
// passed on, the fixed names of answers that broke off, and the rule that turns any of them into a
// bounded metrics label (telemetry/ and proxy/ both read these; neither owns them).
/** Canton error codes: upper snake case ids (TOPOLOGY_SERIAL_MISMATCH); anything else is not trusted as a label. */
export const CANTON_CODE = /^[A-Z][A-Z0-9_]{0,79}$/;

/**
 * Canton redacts security errors to code "NA" (DecodedCantonError.scala `redactedError`); its gRPC
 * code tells them apart: the code a redacted answer is refined to.
 */
export const REDACTED_BY_GRPC: Readonly<Record<number, string>> = {
  16: 'UNAUTHENTICATED',
  7: 'PERMISSION_DENIED',
  13: 'INTERNAL',
  12: 'UNIMPLEMENTED',
  3: 'INVALID_ARGUMENT',
};

/** The codes a redacted ("NA") answer is refined to; a fixed set for the metrics label. */
export const REDACTED_CODES: readonly string[] = Object.values(REDACTED_BY_GRPC);

/** How the participant's error answers are named when they carry no code of Canton's shape. */
export const UpstreamCodes = {
  /** text/plain (tapir decode failures) or any other non-JSON error body. */
  decodeFailure: 'DECODE_FAILURE',
  /** Canton's legacy v1 shape for an unknown route: {"errors":[...],"status":404}. */
  routeNotFound: 'ROUTE_NOT_FOUND',
  /**
   * pekko-http's own 503 when the participant has not begun its answer within
   * `http-ledger-api.request-timeout` (20 s; Canton `JsonApiConfig.scala`): the call's outcome is unknown.
   */
  participantRequestTimeout: 'PARTICIPANT_REQUEST_TIMEOUT',
  /** JSON without a usable code, or an empty body. */
  unrecognized: 'UNRECOGNIZED_ERROR',
} as const;

/** error_code values that are neither a catalogue code nor a participant's code. */
export const ErrorCodeLabels = {
  /** A finished request without an error. */
  none: 'none',
  /** A participant code first seen after maxUpstreamErrorCodes distinct ones, or not shaped like a Canton code. */
  other: 'OTHER',
  /** The client went away before its answer was complete (status 499, nginx's and Canton's CANCELLED status). */
  clientClosedRequest: 'CLIENT_CLOSED_REQUEST',
  /** The participant's answer broke off mid-body (the client saw its connection end): the participant's status. */
  upstreamAnswerBroken: 'UPSTREAM_ANSWER_BROKEN',
  /** The client stopped reading its answer for the call's timeout, and the gateway ended it: its status. */
  clientStalled: 'CLIENT_STALLED',
  /**
   * Still in flight when the shutdown grace ended, so the gateway closed its connection: the answer's status once
   * its head was sent, else 503.
   */
  shutdownGraceElapsed: 'SHUTDOWN_GRACE_ELAPSED',
} as const;

/** Status recorded for a request whose client went away before the answer was complete. */
export const CLIENT_CLOSED_STATUS = 499;

/** The error code of a finished request: none, or the gateway's or the participant's code. */
export function outcomeCode(status: number, errorCode: string | null): string {
  if (errorCode !== null) return errorCode;
  return status >= 400 ? UpstreamCodes.unrecognized : ErrorCodeLabels.none;
}

/** Codes that never count against the cap: the gateway's catalogue and the fixed upstream classifications. */
const FIXED_CODES: ReadonlySet<string> = new Set<string>([
  ...Object.values(Errors).map((definition) => definition.code),
  ...Object.values(UpstreamCodes),
  ...REDACTED_CODES,
  'NA',
  ...Object.values(ErrorCodeLabels),
]);

/**
 * The error_code label of a finished request: `none` for a success, the catalogue's or the
 * participant's code otherwise. Participant codes are kept while fewer than `maxUpstreamCodes`
 * distinct ones have been seen; later new ones, and anything not shaped like a Canton code, are OTHER.
 */
export function errorCodeLabeler(maxUpstreamCodes: number): (code: string | null, status: number) => string {
  const seen = new Set<string>();
  return (code, status) => {
    if (code === null) return outcomeCode(status, code);
    if (FIXED_CODES.has(code) || seen.has(code)) return code;
    if (!CANTON_CODE.test(code) || seen.size >= maxUpstreamCodes) return ErrorCodeLabels.other;
    seen.add(code);
    return code;
  };
}
