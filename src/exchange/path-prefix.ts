// The client-facing path prefix (server.pathPrefix): an ingress that exposes the JSON API under a
// prefix and rewrites it to `/` (Splice's `/api/json-api/`, cn-quickstart's nginx) can be the gateway
// itself. A request under the prefix is served as its unprefixed path, so that the route catalogue,
// metrics, logs, traces, the audit trail and the participant (behind its own base path, upstream.url)
// see the canonical path; any other request is answered as Canton answers a path it does not serve.
// The API listener strips it (server/api-server.ts), once per request, before anything reads the path.
import type { IncomingMessage, Server } from 'node:http';
import { Errors, GatewayError } from '../errors.js';
import { pathOf } from '../operations.js';

const kClientTarget = Symbol('ledger-gateway.clientTarget');
const kOutsidePrefix = Symbol('ledger-gateway.outsidePathPrefix');

type PrefixedRequest = IncomingMessage & { [kClientTarget]?: string; [kOutsidePrefix]?: true };

/** server.pathPrefix as matched: undefined when none, else without its trailing slash (`/api/json-api/` -> `/api/json-api`). */
export function normalizedPathPrefix(configured: string | undefined): string | undefined {
  if (configured === undefined) return undefined;
  const trimmed = configured.endsWith('/') ? configured.slice(0, -1) : configured;
  return trimmed === '' ? undefined : trimmed;
}

/**
 * Strips `prefix` from the request target, once (a second call, for an upgrade Node hands on as a
 * plain call, changes nothing). The prefix must match whole segments, byte for byte: `/api/json-api`
 * serves `/api/json-api/v2/...` (and `/api/json-api` itself as `/`), never `/api/json-apis/...` or an
 * encoded spelling of it. A target outside it keeps its path and is marked for refusal (outsidePathPrefix).
 */
export function stripPathPrefix(request: IncomingMessage, prefix: string): string {
  const prefixed = request as PrefixedRequest;
  const url = request.url ?? '/';
  if (prefixed[kClientTarget] !== undefined) return url;
  prefixed[kClientTarget] = url;
  if (url.startsWith(prefix)) {
    const next = url.charCodeAt(prefix.length);
    if (Number.isNaN(next)) request.url = '/';
    else if (next === 47 /* / */) request.url = url.slice(prefix.length);
    else if (next === 63 /* ? */) request.url = `/${url.slice(prefix.length)}`;
    else prefixed[kOutsidePrefix] = true;
  } else {
    prefixed[kOutsidePrefix] = true;
  }
  return request.url ?? '/';
}

/** The request, its target stripped of `prefix` when one is set (for Node's shouldUpgradeCallback). */
export function stripped(request: IncomingMessage, prefix: string | undefined): IncomingMessage {
  if (prefix !== undefined) stripPathPrefix(request, prefix);
  return request;
}

/**
 * Strips every upgrade's target before the upgrade handler reads it: Node before 24.9 has no
 * shouldUpgradeCallback, which does it first on later versions.
 */
export function stripUpgradeTargets(server: Server, prefix: string): void {
  server.prependListener('upgrade', (request: IncomingMessage) => stripPathPrefix(request, prefix));
}

/** The request came under server.pathPrefix's listener but outside the prefix. */
export function outsidePathPrefix(request: IncomingMessage): boolean {
  return (request as PrefixedRequest)[kOutsidePrefix] === true;
}

/**
 * The refusal of a request outside the prefix: what a participant answers a path it does not serve
 * (Canton `EndpointsCompanion.scala` notFound: 404 `{"errors":["GET, uri: http://host/path"],"status":404}`),
 * the query left out (its values are never echoed) and the path cut at 200 characters.
 */
export function outsidePathPrefixRefusal(request: IncomingMessage): GatewayError {
  const path = pathOf(request.url ?? '/');
  const shown = path.length > 200 ? `${path.slice(0, 200)}…` : path;
  const scheme = (request.socket as { encrypted?: boolean } | null)?.encrypted === true ? 'https' : 'http';
  const host = request.headers.host ?? 'localhost';
  return new GatewayError(Errors.GATEWAY_OUTSIDE_PATH_PREFIX, {
    cause: `${request.method ?? 'GET'}, uri: ${scheme}://${host}${shown}`,
  });
}
