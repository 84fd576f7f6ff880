// What a request rule answers: a catalogue error with the cause, context and resources Canton
// would put in its own answer (causes: Canton's RequestValidationErrors, ProtoDeserializationError,
// IdentityProviderConfigServiceErrors).
import type { Principal } from '../exchange/exchange.js';
import { Errors, GatewayError, type ErrorDefinition, type ErrorOrigin } from '../errors.js';

export interface Violation {
  readonly definition: ErrorDefinition;
  readonly cause: string;
  readonly context?: Record<string, string>;
  readonly resources?: Array<[string, string]>;
  /** Raised by Canton's gRPC Ledger API (unset: by its JSON layer); see ErrorOrigin. */
  readonly origin?: ErrorOrigin;
  /** For the log line of a redacted refusal only (never sent). */
  readonly reason?: string;
}

/** What a rule may look at besides the body. */
export interface RuleContext {
  /** The raw request path without the query, still percent-encoded. */
  readonly path: string;
  /** The verified caller, or null on a public operation. */
  readonly principal: Principal | null;
  /**
   * The text as sent of the number at a dotted key path the rule declared in `exactNumbers`
   * ("commands.tapsMaxPasses"); undefined for any other path, or when the value there is no number.
   */
  readonly numberText: (path: string) => string | undefined;
}

/** A request rule: a pure function of the parsed body. */
export interface RequestRule {
  (body: unknown, context: RuleContext): Violation | undefined;
  /** The key paths of the integers the rule judges on their exact digits: only these numbers' texts are kept. */
  readonly exactNumbers: readonly string[];
}

export function requestRule(
  exactNumbers: readonly string[],
  check: (body: unknown, context: RuleContext) => Violation | undefined,
): RequestRule {
  return Object.assign(check, { exactNumbers });
}

export function toGatewayError(violation: Violation): GatewayError {
  return new GatewayError(
    violation.definition,
    {
      cause: violation.cause,
      context: violation.context ?? {},
      resources: violation.resources ?? [],
      ...(violation.origin !== undefined && { origin: violation.origin }),
    },
    violation.reason === undefined ? {} : { reason: violation.reason },
  );
}

// Canton's causes, verbatim.

/**
 * The JSON decoder refuses the body (tapir + circe): 400 text/plain "Invalid value for: body
 * (<detail> at '<path>')" (Canton `V2Routes.scala`), in the sandbox's wording (src/sandbox/decode.ts).
 */
export function decodeFailure(detail: string, path: string): Violation {
  return { definition: Errors.DECODE_FAILURE, cause: `${detail} at '${path}'` };
}

/** A field the decoder requires (a strict JS mirror type, a oneof's `value`) is absent. */
export function missingRequired(path: string): Violation {
  return decodeFailure('Missing required field', path);
}

// The gRPC Ledger API's validation (RequestValidationErrors: a definite answer).

export function missingField(fieldName: string): Violation {
  return {
    definition: Errors.MISSING_FIELD,
    cause: `The submitted command is missing a mandatory field: ${fieldName}`,
    context: { field_name: fieldName },
    origin: 'grpc-definite-answer',
  };
}

export function invalidField(fieldName: string, message: string): Violation {
  return {
    definition: Errors.INVALID_FIELD,
    cause: `The submitted command has a field with invalid value: Invalid field ${fieldName}: ${message}`,
    origin: 'grpc-definite-answer',
  };
}

export function invalidArgument(reason: string): Violation {
  return {
    definition: Errors.INVALID_ARGUMENT,
    cause: `The submitted request has invalid arguments: ${reason}`,
    origin: 'grpc-definite-answer',
  };
}

/** The same code raised by the JSON layer itself (a path/body mismatch: Canton `JsIdentityProviderService.scala`). */
export function jsonLayerInvalidArgument(reason: string): Violation {
  return { definition: Errors.INVALID_ARGUMENT, cause: `The submitted request has invalid arguments: ${reason}` };
}

export function nonPositiveOffset(fieldName: string, offset: string): Violation {
  return {
    definition: Errors.NON_POSITIVE_OFFSET,
    cause: `Offset ${offset} in ${fieldName} is not a positive integer: the offset has to be a positive integer (>0)`,
    origin: 'grpc-definite-answer',
  };
}

/** `reason` is Canton's ProtoDeserializationError, which its error context carries (a CantonError: no definite answer). */
export function protoDeserializationFailure(reason: string): Violation {
  return {
    definition: Errors.PROTO_DESERIALIZATION_FAILURE,
    cause: 'Deserialization of protobuf message failed',
    context: { reason },
    origin: 'grpc',
  };
}

export function permissionDenied(reason: string): Violation {
  return { definition: Errors.PERMISSION_DENIED, cause: 'permission denied', reason };
}

// Reading a parsed JSON body without trusting it.

export type JsonObject = Record<string, unknown>;

export function isObject(value: unknown): value is JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** An own property only: `constructor`, `__proto__` and friends are never inherited here. */
export function field(holder: JsonObject, name: string): unknown {
  return Object.hasOwn(holder, name) ? holder[name] : undefined;
}

/** Absent or JSON null: what circe decodes as None for an optional field. */
export function isAbsent(value: unknown): value is undefined | null {
  return value === undefined || value === null;
}

export function join(path: string, key: string | number): string {
  return typeof key === 'number' ? `${path}[${key}]` : path === '' ? key : `${path}.${key}`;
}

/** The JSON decoder refuses this value's type: a decode failure naming the type it expected. */
export function wrongType(path: string, expected: string, _value: unknown): Violation {
  return decodeFailure(`Got value with wrong type, expecting ${expected.replace(/^an? /, '')}`, path);
}

/** Checks an optional field's JSON type; absent and null pass (circe: None / the default). */
export function optionalOfType(
  holder: JsonObject,
  name: string,
  path: string,
  type: 'string' | 'boolean' | 'object' | 'array',
): Violation | undefined {
  const value = field(holder, name);
  if (isAbsent(value)) return undefined;
  const ok = type === 'object' ? isObject(value) : type === 'array' ? Array.isArray(value) : typeof value === type;
  return ok
    ? undefined
    : wrongType(join(path, name), type === 'array' ? 'an array' : type === 'object' ? 'an object' : `a ${type}`, value);
}

/** An optional array of strings. */
export function optionalStringArray(holder: JsonObject, name: string, path: string): Violation | undefined {
  const value = field(holder, name);
  if (isAbsent(value)) return undefined;
  if (!Array.isArray(value)) return wrongType(join(path, name), 'an array of strings', value);
  const index = value.findIndex((entry) => typeof entry !== 'string');
  return index === -1 ? undefined : wrongType(join(join(path, name), index), 'a string', value[index]);
}

/**
 * A protobuf oneof as Canton's JSON carries it: an object keyed by the variant. The variant keys
 * present, in the order the object has them; the decoder picks one of them, so a rule accepts the
 * object when any present variant is acceptable (never refusing what the participant may accept).
 */
export function variantKeys<V extends string>(value: JsonObject, variants: readonly V[]): V[] {
  return Object.keys(value).filter((key): key is V => (variants as readonly string[]).includes(key));
}

/**
 * A oneof's present variants (variantKeys), each checked: undefined as soon as one is acceptable (the
 * decoder may pick it), else the first one's violation.
 */
export function oneofViolation<V extends string>(
  variants: readonly V[],
  check: (variant: V) => Violation | undefined,
): Violation | undefined {
  let first: Violation | undefined;
  for (const variant of variants) {
    const violation = check(variant);
    if (violation === undefined) return undefined;
    first ??= violation;
  }
  return first;
}
