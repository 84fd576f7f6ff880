// Header rewriting between client and participant: pure functions, unit-tested.
// Hop-by-hop headers are per connection and never forwarded (RFC 9110 §7.6.1).
import type { IncomingMessage } from 'node:http';
import { isIPv6 } from 'node:net';

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'http2-settings',
]);

/** The X-Forwarded-* facts of a client's request (plain calls and WebSocket upgrades alike). */
export function forwardedFor(request: IncomingMessage, isTrustedProxy: (address: string) => boolean): ForwardedFor {
  const remoteAddress = request.socket.remoteAddress ?? '';
  return {
    remoteAddress,
    protocol: 'encrypted' in request.socket ? 'https' : 'http',
    host: request.headers.host,
    trusted: isTrustedProxy(remoteAddress),
  };
}

/**
 * Headers the gateway sets itself upstream, or that name the client's address: a client's values
 * are dropped (forged headers); a trusted proxy's are kept (X-Forwarded-* appended to).
 */
const GATEWAY_OWNED = new Set([
  'host',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'forwarded',
  'x-real-ip',
]);

export interface ForwardedFor {
  /** The client's address as the gateway saw it. */
  readonly remoteAddress: string;
  readonly protocol: 'http' | 'https';
  readonly host: string | undefined;
  /** True when the connection comes from a configured trusted proxy: its X-Forwarded-* are kept and appended to. */
  readonly trusted: boolean;
}

/**
 * Adds the header names a Connection value lists (RFC 9110 §7.6.1) to `into`. The `close` and
 * `keep-alive` options name nothing more to drop (keep-alive is hop-by-hop anyway, Close is a
 * reserved field name): the usual values cost no Set.
 */
function addConnectionTokens(value: string, into: Set<string> | undefined): Set<string> | undefined {
  if (value === 'keep-alive' || value === 'close') return into;
  for (const token of value.split(',')) {
    const name = token.trim().toLowerCase();
    if (name !== '' && name !== 'close' && name !== 'keep-alive') (into ??= new Set()).add(name);
  }
  return into;
}

function connectionTokens(rawHeaders: readonly string[]): Set<string> | undefined {
  let tokens: Set<string> | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 10 && name.toLowerCase() === 'connection')
      tokens = addConnectionTokens(rawHeaders[i + 1]!, tokens);
  }
  return tokens;
}

/**
 * The request headers to send upstream, as a flat [name, value, ...] list that keeps the client's
 * order, case and repeated fields. Drops hop-by-hop headers and those the Connection header names,
 * the client's Host and X-Forwarded-* (unless from a trusted proxy), the underscore twins of all
 * these (X_Forwarded_For), and, when `dropTraceContext` is set, traceparent/tracestate (the tracing
 * instrumentation then injects the gateway's own).
 */
export function upstreamRequestHeaders(
  rawHeaders: readonly string[],
  forwarded: ForwardedFor,
  dropTraceContext: boolean,
  extraDrop?: ReadonlySet<string>,
): string[] {
  const named = connectionTokens(rawHeaders);
  const out: string[] = [];
  let priorFor: string | undefined;
  let priorProto: string | undefined;
  let priorHost: string | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const value = rawHeaders[i + 1]!;
    const lower = name.toLowerCase();
    if (lower.includes('_') && isUnderscoreTwin(lower, named, extraDrop)) continue;
    // Expect: 100-continue is answered by the gateway's own server; undici refuses to send it on.
    if (HOP_BY_HOP.has(lower) || named?.has(lower) || lower === 'expect') continue;
    if (GATEWAY_OWNED.has(lower)) {
      if (forwarded.trusted) {
        if (lower === 'x-forwarded-for') priorFor = priorFor === undefined ? value : `${priorFor}, ${value}`;
        else if (lower === 'x-forwarded-proto') priorProto ??= value;
        else if (lower === 'x-forwarded-host') priorHost ??= value;
        else if (lower !== 'host') out.push(name, value); // Forwarded, X-Real-IP: the trusted proxy's own
      }
      continue;
    }
    if (dropTraceContext && (lower === 'traceparent' || lower === 'tracestate')) continue;
    if (extraDrop?.has(lower)) continue;
    out.push(name, value);
  }
  out.push(
    'x-forwarded-for',
    priorFor === undefined ? forwarded.remoteAddress : `${priorFor}, ${forwarded.remoteAddress}`,
  );
  out.push('x-forwarded-proto', priorProto ?? forwarded.protocol);
  const host = isValidHost(priorHost) ? priorHost : isValidHost(forwarded.host) ? forwarded.host : undefined;
  if (host !== undefined) out.push('x-forwarded-host', host);
  return out;
}

// RFC 9110 §7.2 / RFC 3986 §3.2.2: uri-host [ ":" port ], the host a name of unreserved characters
// (no percent-encoding or sub-delims: nothing a reader of X-Forwarded-Host would split or decode),
// an IPv4 address, or an IPv6 address in brackets.
const HOST_NAME = /^[A-Za-z0-9._~-]{1,253}(?::\d{1,5})?$/;
const IPV6_HOST = /^\[([0-9A-Fa-f:.]{2,45})\](?::\d{1,5})?$/;

/**
 * Whether a Host value is one a participant may be told in X-Forwarded-Host: `evil.com/v2/users`,
 * `a@evil` or a list are not, and such a value is not forwarded (the participant may build links from it).
 */
export function isValidHost(value: string | undefined): value is string {
  if (value === undefined) return false;
  if (HOST_NAME.test(value)) return true;
  const literal = IPV6_HOST.exec(value);
  return literal !== null && isIPv6(literal[1]!);
}

/**
 * Whether an underscored header name (`x_forwarded_for`) is the twin of one the gateway drops or
 * rewrites: a server that reads `_` as `-` would take it for the field the gateway vouches for. Of
 * Content-Length too: read as a second length, it would frame the body otherwise than the gateway did.
 */
function isUnderscoreTwin(lower: string, named?: ReadonlySet<string>, extraDrop?: ReadonlySet<string>): boolean {
  const dashed = lower.replaceAll('_', '-');
  return (
    HOP_BY_HOP.has(dashed) ||
    GATEWAY_OWNED.has(dashed) ||
    dashed === 'content-length' ||
    named?.has(dashed) === true ||
    extraDrop?.has(dashed) === true
  );
}

/**
 * Response headers from the participant minus hop-by-hop ones (undici gives lower-case names), added
 * to `out`: the forwarder passes the gateway's own answer headers, so an answer makes one object.
 */
export function clientResponseHeaders<T extends Record<string, unknown> = Record<string, string | string[]>>(
  headers: Record<string, string | string[] | undefined>,
  out: T = {} as T,
): T {
  const connection = headers.connection;
  // Repeated Connection fields come as an array: each names headers to drop too.
  const named =
    typeof connection === 'string'
      ? addConnectionTokens(connection, undefined)
      : Array.isArray(connection)
        ? addConnectionTokens(connection.join(','), undefined)
        : undefined;
  const into = out as Record<string, unknown>;
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || HOP_BY_HOP.has(name) || named?.has(name)) continue;
    into[name] = value;
  }
  return out;
}

const AUTHORIZATION: ReadonlySet<string> = new Set(['authorization']);

/** `drop` and Authorization: the client's credential, when the gateway sends its own in its place. */
export function withAuthorizationDropped(drop: ReadonlySet<string> | undefined): ReadonlySet<string> {
  return drop === undefined ? AUTHORIZATION : new Set([...drop, 'authorization']);
}
