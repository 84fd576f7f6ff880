// CORS for browser dApps (Fetch standard, "CORS protocol"), one handler per configuration generation,
// so that a reload can turn CORS on or off and change its origins live. Written here rather than with
// @fastify/cors: that plugin registers its hook and an `OPTIONS *` route once per server, and with a
// per-request delegator it still adds `Vary: Origin` to every answer and takes every OPTIONS, even
// while the running config has CORS off. What the gateway needs of the protocol is fixed lists.
// The handler runs before authentication: browsers never send credentials on a preflight.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { CorsConfig } from '../config/schema.js';

/** Adds the CORS headers to the reply, or answers a preflight itself: true then (the call's walk ends). */
export type CorsHandler = (request: FastifyRequest, reply: FastifyReply) => boolean;

/** Appends `Origin` to the reply's Vary header (an answer differs by origin: RFC 9110 §12.5.5). */
function varyOnOrigin(reply: FastifyReply): void {
  const vary = reply.getHeader('vary');
  if (vary === undefined) reply.header('vary', 'Origin');
  else if (!/(^|,)\s*(origin|\*)\s*(,|$)/i.test(String(vary))) reply.header('vary', `${String(vary)}, Origin`);
}

/**
 * The handler for the configured policy, or undefined when CORS is off. An allowed origin is echoed
 * with the grant (credentials and exposed headers as configured); any other origin, or none, gets no
 * Access-Control-Allow-Origin, Allow-Credentials or Expose-Headers. Any OPTIONS is a preflight while
 * CORS is on: the participant serves no OPTIONS route of its own. With CORS off, OPTIONS is forwarded.
 */
export function createCorsHandler(cors: CorsConfig): CorsHandler | undefined {
  if (!cors.enabled) return undefined;
  const anyOrigin = cors.origins.includes('*');
  const listed = new Set(cors.origins);
  const allowMethods = cors.methods.join(', ');
  const allowHeaders = cors.allowedHeaders.join(', ');
  const exposeHeaders = cors.exposedHeaders.join(', ');
  const maxAge = String(cors.maxAgeSeconds);

  return function applyCors(request, reply) {
    const origin = request.headers.origin;
    varyOnOrigin(reply);
    if (anyOrigin || (origin !== undefined && listed.has(origin))) {
      reply.header('access-control-allow-origin', anyOrigin ? '*' : origin);
      if (cors.credentials) reply.header('access-control-allow-credentials', 'true');
      if (exposeHeaders !== '') reply.header('access-control-expose-headers', exposeHeaders);
    }
    if (request.method !== 'OPTIONS') return false;
    reply.header('access-control-allow-methods', allowMethods);
    if (allowHeaders !== '') reply.header('access-control-allow-headers', allowHeaders);
    reply.header('access-control-max-age', maxAge);
    // Some browsers wait for a body on a 204 without Content-Length.
    void reply.code(204).header('content-length', '0').send();
    return true;
  };
}
