// A participant serving its JSON API under a path prefix itself (Canton `http-ledger-api.path-prefix`,
// the Splice participant chart's CANTON_PARTICIPANT_JSON_API_SERVER_PATH_PREFIX): every route, its
// own 404 and the WebSocket streams move under the prefix (Canton `HttpService.scala` wraps all of
// them in pekko's `pathPrefix`); a path outside it is rejected by pekko's default rejection handler:
// 404 text/plain "The requested resource could not be found.".
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';

/** pekko-http's answer to a request no route took (`RejectionHandler.default`, an empty rejection list). */
export const PEKKO_NOT_FOUND = 'The requested resource could not be found.';

const outside = new WeakSet<IncomingMessage>();

/** The target without the prefix; a request outside it is remembered and keeps its target. */
export function withoutPathPrefix(request: IncomingMessage, prefix: string): string {
  const url = request.url ?? '/';
  const rest = url.startsWith(prefix) ? url.slice(prefix.length) : undefined;
  if (rest === '' || rest?.startsWith('/')) return rest === '' ? '/' : rest;
  if (rest?.startsWith('?')) return `/${rest}`;
  outside.add(request);
  return url;
}

/**
 * Strips the prefix from an upgrade's target (keeping the target as received as `originalUrl`, as
 * Fastify's rewriteUrl does for a call); false, once answered 404, for one outside it.
 */
export function upgradeUnderPathPrefix(request: IncomingMessage, socket: Duplex, prefix: string): boolean {
  Object.assign(request, { originalUrl: request.url });
  request.url = withoutPathPrefix(request, prefix);
  if (!outside.has(request)) return true;
  const head = `HTTP/1.1 404 Not Found\r\nContent-Type: text/plain; charset=UTF-8\r\nContent-Length: ${PEKKO_NOT_FOUND.length}`;
  socket.end(`${head}\r\nConnection: close\r\n\r\n${PEKKO_NOT_FOUND}`);
  return false;
}

/** Answers the calls outside the prefix as pekko does, before any route runs. */
export function refuseOutsidePathPrefix(app: FastifyInstance): void {
  app.addHook('onRequest', (request, reply, done) => {
    if (!outside.has(request.raw)) return done();
    void reply.code(404).type('text/plain; charset=UTF-8').send(PEKKO_NOT_FOUND);
  });
}
