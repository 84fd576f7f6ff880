// The error code of a participant's error answer (Canton `JsSchema.scala` JsCantonError), for the metrics
// label and the request line.
import { CANTON_CODE, REDACTED_BY_GRPC, UpstreamCodes } from '../errors.js';

/** How many bytes of an error body are read to find its code; the body is passed on whole regardless. */
export const ERROR_BODY_CAPTURE_BYTES = 16 * 1024;

/**
 * The text/plain body pekko-http answers (503) when a route has not produced its answer within the
 * server's request-timeout, which Canton sets from `http-ledger-api.request-timeout` (20 s;
 * `HttpService.scala` withRequestTimeout, no custom answer): pekko's `HttpServerBluePrint` default.
 */
const PEKKO_TIMEOUT_ANSWER = Buffer.from('The server was not able to produce a timely response to your request.');

export function upstreamErrorCode(contentType: string | undefined, body: Buffer, truncated: boolean): string {
  // No body at all (a HEAD's answer, an empty error) carries no code: not a decode failure either.
  if (body.length === 0) return UpstreamCodes.unrecognized;
  if (contentType === undefined || !/\bjson\b/i.test(contentType)) {
    const timedOut =
      body.length >= PEKKO_TIMEOUT_ANSWER.length &&
      body.subarray(0, PEKKO_TIMEOUT_ANSWER.length).equals(PEKKO_TIMEOUT_ANSWER);
    return timedOut ? UpstreamCodes.participantRequestTimeout : UpstreamCodes.decodeFailure;
  }
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
