// The error codes a request can end with, other than the catalogue's own (errors.ts): the
// participant's codes passed on, the fixed names of answers that broke off, and the rule that turns
// any of them into a bounded metrics label. telemetry/ and proxy/ both read these; neither owns them.
import { Errors } from './errors.js';

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
