// The request context checks, for a call and an upgrade alike (context-stage.ts runs them): sound
// framing, a clean request target, the operation from the route catalogue.
import type { IncomingMessage } from 'node:http';
import type { RoutesConfig } from '../config/schema.js';
import { contentTypesConflict } from '../body/content-type.js';
import { Errors, GatewayError } from '../errors.js';
import { matchOperation, matchWebSocketOperation, pathOf, UNKNOWN_OPERATION, type Operation } from '../operations.js';

const DOT_SEGMENT = /(?:^|\/)(?:\.|%2e){1,2}(?:\/|$)/i;
const ENCODED_SLASH = /%2f/i;

/**
 * What a hop that decodes `%2F` before routing would see in a segment holding one: a dot segment
 * (`..%2f..%2fdocs`) would climb out of the route matched here, an empty one (`a%2F`, merged by
 * many) would reach another. An encoded slash inside an ordinary id (`a%20b%2Fc`) passes.
 */
function encodedSlashProblem(path: string): string | undefined {
  for (const segment of path.split('/')) {
    if (!ENCODED_SLASH.test(segment)) continue;
    for (const part of segment.replace(/%2e/gi, '.').split(/%2f/i)) {
      if (part === '.' || part === '..') return 'the path contains a dot segment between percent-encoded slashes';
      if (part === '') return 'the path contains an empty segment between percent-encoded slashes';
    }
  }
  return undefined;
}

/**
 * Why a request target is refused, or undefined when it is a plain origin-form path. Dot segments
 * and empty segments (raw, percent-encoded, or between encoded slashes), backslashes and fragments are
 * refused so that no path reaches another route upstream than the one the catalogue matched here
 * (RFC 3986 §5.2.4; issue: path tricks).
 */
export function requestTargetProblem(url: string): string | undefined {
  if (url.charCodeAt(0) !== 47 /* / */) return 'the request target is not an origin-form path';
  // A fragment is no part of a request target (RFC 9112 §3.2.1): Node's parser lets it through,
  // pekko-http refuses it. Matched with it, `/v2/users#x` would be `unknown` here while a hop that
  // drops fragments would deliver it to getV2Users.
  if (url.includes('#')) return 'the request target contains a fragment (#)';
  const path = pathOf(url);
  const encoded = path.includes('%');
  if (path.includes('\\') || (encoded && /%5c/i.test(path))) return 'the path contains a backslash';
  if ((encoded || path.includes('.')) && DOT_SEGMENT.test(path)) return 'the path contains a dot segment';
  if (path.includes('//')) return 'the path contains an empty segment';
  return encoded && ENCODED_SLASH.test(path) ? encodedSlashProblem(path) : undefined;
}

/**
 * Why a request's framing is refused (RFC 9112), or undefined. Node's parser lets these through (the
 * missing Host only to a bare 400 without a body, which the API server leaves to this check):
 * an HTTP/1.1 request without Host, a request with more than one Host field line (§3.2: both MUST
 * be answered 400; Node keeps the first Host, a hop before the gateway may have routed on the
 * other), and an HTTP/1.0 request with Transfer-Encoding, whose framing is faulty (§6.1: a hop
 * before the gateway may have read its body differently).
 */
export function framingProblem(request: IncomingMessage): string | undefined {
  const socket = request.socket as FramedSocket | null;
  if (socket?.[kFaultyFraming] === true) return 'a request after one with faulty framing on the same connection';
  const problem =
    request.httpVersionMinor === 1 && request.headers.host === undefined
      ? 'an HTTP/1.1 request without a Host header'
      : request.httpVersionMinor !== 1 && request.headers['transfer-encoding'] !== undefined
        ? 'an HTTP/1.0 request with Transfer-Encoding'
        : hostLines(request.rawHeaders) > 1
          ? 'a request with more than one Host header'
          : undefined;
  // Requests pipelined behind it were parsed from bytes whose framing is in doubt (they may be what
  // a hop before the gateway took for a body): none of them is served either.
  if (problem !== undefined && socket !== null) socket[kFaultyFraming] = true;
  return problem;
}

/** How many Host field lines a request has (names compared by length first: no lower-casing per header). */
function hostLines(rawHeaders: readonly string[]): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 4 && (name === 'Host' || name === 'host' || name.toLowerCase() === 'host')) count++;
  }
  return count;
}

/**
 * Why a request's Content-Type lines are refused, or undefined: lines that declare different types.
 * Node keeps the first for the gateway's own reading while every line is forwarded, so the participant
 * could read another type than the one a rule was judged by; pekko-http refuses such a request itself
 * (its `conflicting-content-type-header-processing-mode` is `error` by default). Lines alike, and a line
 * that does not parse (pekko keeps it as a raw header), are let through as pekko lets them through.
 */
export function contentTypeProblem(rawHeaders: readonly string[]): string | undefined {
  if (!contentTypesConflict(rawHeaders)) return undefined;
  return 'the request has Content-Type lines that declare different types';
}

/**
 * Why a request whose Connection header names the field that carries its credential is refused, or
 * undefined. A proxy must remove the fields its Connection header names (RFC 9110 §7.6.1), so the
 * participant would not get the token the gateway verified: on a WebSocket upgrade it would then read
 * another one, from a `jwt.token.` subprotocol the gateway never checked (Canton `Endpoints.scala`
 * `baseEndpoint`: the Authorization header wins only when present). Refused rather than forwarded with the field kept.
 * The usual values (`keep-alive`, `close`, `Upgrade`) cost no parsing.
 */
export function connectionOptionProblem(connection: string | undefined, upgrade: boolean): string | undefined {
  if (connection === undefined || connection.length < 13) return undefined; // shorter than "authorization"
  for (const option of connection.split(',')) {
    const name = option.trim().toLowerCase();
    if (name === 'authorization' || (upgrade && name === 'sec-websocket-protocol')) {
      return `the Connection header names ${name}, which carries the credential the gateway verifies for the participant`;
    }
  }
  return undefined;
}

const kFaultyFraming = Symbol('ledger-gateway.faultyFraming');
type FramedSocket = IncomingMessage['socket'] & { [kFaultyFraming]?: true };

/** The coded refusal of a request whose framing is faulty: its connection cannot be trusted further. */
export function framingRefusal(problem: string): GatewayError {
  return new GatewayError(
    Errors.GATEWAY_MALFORMED_REQUEST,
    { cause: `The request is malformed: ${problem}.` },
    { headers: { connection: 'close' } },
  );
}

/** The operation of a request, or the coded refusal for a route the gateway does not serve. */
export function resolveOperation(method: string, url: string, routes: RoutesConfig): Operation {
  const problem = requestTargetProblem(url);
  if (problem !== undefined) {
    throw new GatewayError(Errors.GATEWAY_INVALID_PATH, { cause: `Invalid request target: ${problem}.` });
  }
  const path = pathOf(url);
  const operation = matchOperation(method === 'HEAD' ? 'GET' : method, path);
  if (operation === undefined || (operation.participantInternal && !isExposed(operation, routes))) {
    throw new GatewayError(Errors.GATEWAY_ROUTE_NOT_EXPOSED, {
      cause: `${method} ${path.length > 200 ? `${path.slice(0, 200)}…` : path} is not served by the gateway.`,
    });
  }
  return operation;
}

function offersWebSocket(upgrade: string | undefined): boolean {
  return upgrade !== undefined && upgrade.split(',').some((token) => token.trim().toLowerCase() === 'websocket');
}

/**
 * The operation of a request the gateway tunnels as a WebSocket stream, or undefined for any other
 * request carrying an Upgrade header, which is a plain call (served by the API server's
 * shouldUpgradeCallback, as the participant serves it, with that route's own stages): a GET offering
 * `websocket`, to a catalogued channel or to a path under /v2 that no HTTP route claims (a newer
 * participant's stream, as `unknown`). Never a catalogued HTTP route: an Upgrade header must not
 * turn `GET /v2/users` into an `unknown` tunnel past that route's authorization rules.
 */
export function webSocketOperationOf(request: IncomingMessage): Operation | undefined {
  if (request.method !== 'GET' || !offersWebSocket(request.headers.upgrade)) return undefined;
  const path = pathOf(request.url ?? '/');
  return (
    matchWebSocketOperation(path) ?? (matchOperation('GET', path) === UNKNOWN_OPERATION ? UNKNOWN_OPERATION : undefined)
  );
}

/** The operation of a WebSocket upgrade, or the coded refusal for a target or a stream the gateway does not serve. */
export function resolveUpgradeOperation(request: IncomingMessage): Operation {
  const url = request.url ?? '/';
  const problem = requestTargetProblem(url);
  if (problem !== undefined) {
    throw new GatewayError(Errors.GATEWAY_INVALID_PATH, { cause: `Invalid request target: ${problem}.` });
  }
  // Node versions without shouldUpgradeCallback (before 24.9) hand every Upgrade request here:
  // what is not a stream is refused, never tunnelled.
  const operation = webSocketOperationOf(request);
  if (operation === undefined) {
    const target = `${request.method ?? ''} ${pathOf(url).slice(0, 200)}`;
    throw new GatewayError(Errors.GATEWAY_ROUTE_NOT_EXPOSED, {
      cause: `${target} is not a WebSocket stream the gateway serves.`,
    });
  }
  return operation;
}

function isExposed(operation: Operation, routes: RoutesConfig): boolean {
  return operation.template.startsWith('/docs/') ? routes.exposeParticipantDocs : routes.exposeParticipantHealth;
}
