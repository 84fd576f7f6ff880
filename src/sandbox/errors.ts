// Canton's own errors, as the participant renders them (not the gateway's catalogue).
// Canton sources: body shape `JsSchema.scala`; category -> gRPC code `ErrorCategory.scala`; gRPC code ->
// HTTP status `GrpcHttpErrorCodes.scala`; codes `RequestValidationErrors.scala`; examples: the JSON API
// docs (`docs-open/src/sphinx/sdk/explanations/json-api/index.rst`).

import { randomBytes } from 'node:crypto';
import { httpStatusForGrpcCode, type JsCantonError } from '../errors.js';

/** Error category -> gRPC status code (Canton `ErrorCategory.scala`). */
const GRPC_CODE_BY_CATEGORY: Readonly<Record<number, number>> = {
  1: 14,
  2: 10,
  3: 4,
  4: 13,
  5: 3,
  6: 16,
  7: 7,
  8: 3,
  9: 9,
  10: 6,
  11: 5,
  12: 11,
  14: 12,
};
const RETRYABLE_CATEGORIES = new Set([1, 2, 3, 12]);

interface CantonErrorCode {
  readonly category: number;
  /** Ledger API errors (DamlErrorWithDefiniteAnswer) carry `definite_answer` in their context; topology and package-service errors do not. */
  readonly definiteAnswerInContext: boolean;
}

export const CANTON_ERROR_CODES = {
  INVALID_ARGUMENT: { category: 8, definiteAnswerInContext: true },
  MISSING_FIELD: { category: 8, definiteAnswerInContext: true },
  INVALID_FIELD: { category: 8, definiteAnswerInContext: true },
  NON_POSITIVE_OFFSET: { category: 8, definiteAnswerInContext: true },
  NEGATIVE_OFFSET: { category: 8, definiteAnswerInContext: true },
  PROTO_DESERIALIZATION_FAILURE: { category: 8, definiteAnswerInContext: false },
  INVALID_IDENTITY_PROVIDER_UPDATE_REQUEST: { category: 8, definiteAnswerInContext: false },
  COMMAND_PREPROCESSING_FAILED: { category: 8, definiteAnswerInContext: true },
  TOPOLOGY_SERIAL_MISMATCH: { category: 9, definiteAnswerInContext: false },
  TOPOLOGY_DEPENDENCIES_NOT_VETTED: { category: 9, definiteAnswerInContext: false },
  PACKAGE_SERVICE_CANNOT_AUTODETECT_SYNCHRONIZER: { category: 9, definiteAnswerInContext: false },
  PACKAGE_SERVICE_NOT_CONNECTED_TO_SYNCHRONIZER: { category: 9, definiteAnswerInContext: false },
  AMBIGUOUS_VETTING_REFERENCE: { category: 9, definiteAnswerInContext: false },
  IDP_CONFIG_ALREADY_EXISTS: { category: 10, definiteAnswerInContext: true },
  IDP_CONFIG_ISSUER_ALREADY_EXISTS: { category: 10, definiteAnswerInContext: true },
  UNRESOLVED_VETTING_REFERENCE: { category: 11, definiteAnswerInContext: false },
  CONTRACT_NOT_FOUND: { category: 11, definiteAnswerInContext: true },
  UPDATE_NOT_FOUND: { category: 11, definiteAnswerInContext: true },
  IDP_CONFIG_NOT_FOUND: { category: 11, definiteAnswerInContext: true },
  OFFSET_AFTER_LEDGER_END: { category: 12, definiteAnswerInContext: true },
  LEDGER_API_INTERNAL_ERROR: { category: 4, definiteAnswerInContext: true },
} as const satisfies Record<string, CantonErrorCode>;

export type CantonErrorCodeId = keyof typeof CANTON_ERROR_CODES;

/** The name the sandbox participant puts into error contexts (Canton adds its node name). */
export const SANDBOX_PARTICIPANT_NAME = 'sandbox';

export type ErrorOrigin =
  /** Raised by the gRPC Ledger API and decoded by the JSON layer: `definiteAnswer: null`, context with category/tid. */
  | 'grpc'
  /** Created by the JSON layer itself (JsCantonError.fromErrorCode), e.g. path/body mismatch: `definiteAnswer: false`, empty context. */
  | 'json-layer'
  /** A security-sensitive error, redacted to code NA / category -1 (Canton `DecodedCantonError.scala`). */
  | 'redacted';

export interface SandboxErrorDetails {
  readonly context?: Record<string, string>;
  /** Resource type without the wrapper, e.g. "OFFSET"; rendered as "ErrorResource(OFFSET)" for gRPC errors. */
  readonly resources?: ReadonlyArray<readonly [string, string]>;
  readonly origin?: ErrorOrigin;
}

/** An error the emulated participant answers with; thrown from handlers, rendered by the error handler. */
export class SandboxError extends Error {
  override name = 'SandboxError';
  readonly category: number;
  readonly grpcCode: number;
  readonly status: number;
  readonly origin: ErrorOrigin;

  constructor(
    readonly code: CantonErrorCodeId | 'NA',
    readonly causeText: string,
    readonly details: SandboxErrorDetails = {},
    grpcCodeForRedacted?: number,
  ) {
    super(`${code}: ${causeText}`);
    this.origin = code === 'NA' ? 'redacted' : (details.origin ?? 'grpc');
    if (code === 'NA') {
      this.category = -1;
      this.grpcCode = grpcCodeForRedacted ?? 13;
    } else {
      this.category = CANTON_ERROR_CODES[code].category;
      this.grpcCode = GRPC_CODE_BY_CATEGORY[this.category] ?? 2;
    }
    this.status = httpStatusForGrpcCode(this.grpcCode);
  }
}

export function renderSandboxError(error: SandboxError, traceId: string): JsCantonError {
  if (error.origin === 'redacted') {
    return {
      code: 'NA',
      cause: 'A security-sensitive error has been received',
      correlationId: null,
      traceId,
      context: {},
      resources: [],
      errorCategory: -1,
      grpcCodeValue: error.grpcCode,
      retryInfo: null,
      definiteAnswer: null,
    };
  }
  const retryInfo = RETRYABLE_CATEGORIES.has(error.category) ? '1 second' : null;
  if (error.origin === 'json-layer') {
    // Verbatim shape of the example in Canton's `ledger-json-api/README.md`: no trace id, empty context.
    return {
      code: error.code,
      cause: error.causeText,
      correlationId: null,
      traceId: null,
      context: {},
      resources: (error.details.resources ?? []).map(([type, value]): [string, string] => [type, value]),
      errorCategory: error.category,
      grpcCodeValue: error.grpcCode,
      retryInfo,
      definiteAnswer: false,
    };
  }
  const definition = CANTON_ERROR_CODES[error.code as CantonErrorCodeId];
  const context: Record<string, string> = {
    ...error.details.context,
    participant: SANDBOX_PARTICIPANT_NAME,
    category: String(error.category),
    tid: traceId,
  };
  if (definition.definiteAnswerInContext) context['definite_answer'] = 'false';
  return {
    code: error.code,
    cause: error.causeText,
    correlationId: null,
    traceId,
    context,
    resources: (error.details.resources ?? []).map(([type, value]): [string, string] => [
      `ErrorResource(${type})`,
      value,
    ]),
    errorCategory: error.category,
    grpcCodeValue: error.grpcCode,
    retryInfo,
    definiteAnswer: null,
  };
}

// --- Constructors for the errors several services raise (texts from Canton's RequestValidationErrors). ---

export function missingField(fieldName: string): SandboxError {
  return new SandboxError('MISSING_FIELD', `The submitted command is missing a mandatory field: ${fieldName}`, {
    context: { field_name: fieldName },
  });
}

export function invalidField(fieldName: string, message: string): SandboxError {
  return new SandboxError(
    'INVALID_FIELD',
    `The submitted command has a field with invalid value: Invalid field ${fieldName}: ${message}`,
    { context: { field_name: fieldName } },
  );
}

export function invalidArgument(reason: string, origin: ErrorOrigin = 'grpc'): SandboxError {
  return new SandboxError('INVALID_ARGUMENT', `The submitted request has invalid arguments: ${reason}`, { origin });
}

export function protoDeserializationFailure(reason: string): SandboxError {
  return new SandboxError('PROTO_DESERIALIZATION_FAILURE', 'Deserialization of protobuf message failed', {
    context: { reason },
  });
}

/** The redacted 401 Canton answers when a call needs claims and none came (Canton `JsonApiAuthIT`). */
export function unauthenticated(): SandboxError {
  return new SandboxError('NA', 'The command is missing a (valid) JWT token', {}, 16);
}

// --- W3C trace context (Canton `V2Routes.scala` reads traceparent; the error traceId/tid is its trace id). ---

const TRACEPARENT = /^[\da-f]{2}-([\da-f]{32})-([\da-f]{16})-[\da-f]{2}$/;
const ALL_ZERO = /^0+$/;

/** The trace id of a valid W3C traceparent header, else undefined. */
export function traceIdFromTraceparent(header: string | string[] | undefined): string | undefined {
  if (typeof header !== 'string') return undefined;
  const match = TRACEPARENT.exec(header.trim().toLowerCase());
  const traceId = match?.[1];
  const spanId = match?.[2];
  if (traceId === undefined || spanId === undefined || ALL_ZERO.test(traceId) || ALL_ZERO.test(spanId))
    return undefined;
  return traceId;
}

export function freshTraceId(): string {
  return randomBytes(16).toString('hex');
}

export function freshSpanId(): string {
  return randomBytes(8).toString('hex');
}
