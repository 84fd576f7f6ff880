// The error code of a participant's error answer, for the metrics label (Canton `JsSchema.scala` JsCantonError).

/** Canton error codes: upper snake case ids (e.g. TOPOLOGY_SERIAL_MISMATCH); anything else is not trusted as a label. */
export const CANTON_CODE = /^[A-Z][A-Z0-9_]{0,79}$/;

/** How many bytes of an error body are read to find its code; the body is passed on whole regardless. */
export const ERROR_BODY_CAPTURE_BYTES = 16 * 1024;

/** Canton redacts security errors to "NA"; its gRPC code tells them apart (Canton `DecodedCantonError.scala`). */
const REDACTED_BY_GRPC: Record<number, string> = {
  16: 'UNAUTHENTICATED',
  7: 'PERMISSION_DENIED',
  13: 'INTERNAL',
  12: 'UNIMPLEMENTED',
  3: 'INVALID_ARGUMENT',
};

/** The codes a redacted ("NA") answer is refined to; a fixed set for the metrics label. */
export const REDACTED_CODES: readonly string[] = Object.values(REDACTED_BY_GRPC);

export const UpstreamCodes = {
  /** text/plain (tapir decode failures) or any other non-JSON error body. */
  decodeFailure: 'DECODE_FAILURE',
  /** Canton's legacy v1 shape for an unknown route: {"errors":[...],"status":404}. */
  routeNotFound: 'ROUTE_NOT_FOUND',
  /** JSON without a usable code, or an empty body. */
  unrecognized: 'UNRECOGNIZED_ERROR',
} as const;

export function upstreamErrorCode(contentType: string | undefined, body: Buffer, truncated: boolean): string {
  // No body at all (a HEAD's answer, an empty error) carries no code: not a decode failure either.
  if (body.length === 0) return UpstreamCodes.unrecognized;
  if (contentType === undefined || !/\bjson\b/i.test(contentType)) return UpstreamCodes.decodeFailure;
  if (truncated) {
    // The code is one of the first keys Canton prints; read it without parsing the whole body.
    const text = body.toString('utf8');
    const code = /"code"\s*:\s*"([A-Z][A-Z0-9_]{0,79})"/.exec(text)?.[1];
    if (code !== 'NA') return code ?? UpstreamCodes.unrecognized;
    const grpc = /"grpcCodeValue"\s*:\s*(\d{1,2})\b/.exec(text)?.[1];
    return (grpc === undefined ? undefined : REDACTED_BY_GRPC[Number(grpc)]) ?? 'NA';
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return UpstreamCodes.decodeFailure;
  }
  if (parsed === null || typeof parsed !== 'object') return UpstreamCodes.unrecognized;
  const { code, grpcCodeValue, errors } = parsed as { code?: unknown; grpcCodeValue?: unknown; errors?: unknown };
  if (code === 'NA') return (typeof grpcCodeValue === 'number' ? REDACTED_BY_GRPC[grpcCodeValue] : undefined) ?? 'NA';
  if (typeof code === 'string' && CANTON_CODE.test(code)) return code;
  if (Array.isArray(errors)) return UpstreamCodes.routeNotFound;
  return UpstreamCodes.unrecognized;
}
