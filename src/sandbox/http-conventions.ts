// How Canton's JSON API (tapir on pekko-http) treats any request, independent of the operation:
// bodies, GET with a body, decode failures, error bodies, unknown routes, trace ids
// (Canton `V2Routes.scala`, `HttpService.scala`, `Endpoints.scala`).

import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DecodeFailure } from './decode.js';
import { freshTraceId, renderSandboxError, SandboxError, traceIdFromTraceparent } from './errors.js';
import { JsonSyntaxError, parseJsonPreservingInt64, type Json } from './json.js';

export const BODY_LIMIT_BYTES = 16 * 1024 * 1024;
const RECEIVED_REQUESTS_KEPT = 1000;

export interface ReceivedRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  /** The raw body text, '' when there was none. */
  readonly body: string;
}

const traceIds = new WeakMap<FastifyRequest, string>();
const parsedBodies = new WeakMap<FastifyRequest, Json | undefined>();

/** The request's W3C trace id, or one made up for it (Canton starts a new trace when none came in). */
export function traceIdOf(request: FastifyRequest): string {
  let traceId = traceIds.get(request);
  if (traceId === undefined) {
    traceId = traceIdFromTraceparent(request.headers.traceparent) ?? freshTraceId();
    traceIds.set(request, traceId);
  }
  return traceId;
}

function rawBodyOf(request: FastifyRequest): string {
  return typeof request.body === 'string' ? request.body : '';
}

/**
 * The JSON body, parsed on first use and int64-exact; undefined when the request had no body.
 * Parsing is lazy so that routes without a body input ignore whatever was sent, as tapir does.
 */
export function jsonBodyOf(request: FastifyRequest): Json | undefined {
  if (parsedBodies.has(request)) return parsedBodies.get(request);
  const raw = rawBodyOf(request);
  let parsed: Json | undefined;
  if (raw.trim() !== '') {
    try {
      parsed = parseJsonPreservingInt64(raw);
    } catch (error) {
      if (error instanceof JsonSyntaxError) throw new DecodeFailure(`malformed JSON: ${error.message}`);
      throw error;
    }
  }
  parsedBodies.set(request, parsed);
  return parsed;
}

export function sendSandboxError(reply: FastifyReply, request: FastifyRequest, error: SandboxError): FastifyReply {
  return reply
    .code(error.status)
    .type('application/json')
    .send(renderSandboxError(error, traceIdOf(request)));
}

/**
 * Registers body handling, the error handler and the 404 answer. `received` collects every request
 * (bounded) so proxy tests can assert what the upstream got.
 */
export function registerHttpConventions(app: FastifyInstance, received: ReceivedRequest[]): void {
  // Canton serves GET routes with a JSON body (GET /v2/package-vetting in Canton's OpenAPI).
  app.addHttpMethod('GET', { hasBody: true, overrideExisting: true });

  // Every body is read as text whatever its Content-Type (or none): tapir decodes the JSON body
  // without insisting on the media type, and curl -d sends form-urlencoded.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string', bodyLimit: BODY_LIMIT_BYTES }, (_request, body, done) => {
    done(null, body);
  });

  app.addHook('preHandler', async (request) => {
    received.push({
      method: request.method,
      url: request.originalUrl, // as received: under the participant's path prefix when it has one
      headers: { ...request.headers },
      body: rawBodyOf(request),
    });
    if (received.length > RECEIVED_REQUESTS_KEPT) received.splice(0, received.length - RECEIVED_REQUESTS_KEPT);
  });

  app.setErrorHandler((error: FastifyError | SandboxError | DecodeFailure, request, reply) => {
    if (error instanceof SandboxError) return sendSandboxError(reply, request, error);
    if (error instanceof DecodeFailure) return reply.code(400).type('text/plain; charset=UTF-8').send(error.message);
    const status = 'statusCode' in error && typeof error.statusCode === 'number' ? error.statusCode : 500;
    if (status < 500) return reply.code(status).type('text/plain; charset=UTF-8').send(error.message);
    request.log.error({ err: error }, 'sandbox handler failed');
    return sendSandboxError(
      reply,
      request,
      new SandboxError('LEDGER_API_INTERNAL_ERROR', 'An internal error occurred in the sandbox'),
    );
  });

  // Unknown routes answer with the legacy v1 error shape (`HttpService.scala`, `EndpointsCompanion.notFound`).
  app.setNotFoundHandler((request, reply) => {
    const host = request.headers.host ?? 'localhost';
    return reply
      .code(404)
      .type('application/json')
      .send({ errors: [`${request.method}, uri: http://${host}${request.url}`], status: 404 });
  });
}
