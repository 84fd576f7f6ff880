// How a refusal reaches the client, in Canton's JsCantonError shape with the exchange's correlation
// and trace ids: a call's through Fastify's reply, an upgrade's as raw HTTP/1.1 on its socket (no
// HTTP response exists for it). Either way its code becomes the exchange's error code, and its reason
// (for the log line) the exchange's refusal reason.
import http from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { Errors, GatewayError, renderCantonError, renderDecodeFailure, renderRouteNotFound } from '../errors.js';
import type { Exchange } from './exchange.js';
import { lingerAfterAnswer } from './lingering-close.js';
import { traceIdOf } from '../trace-context.js';

/** Maps Fastify's own errors (bad URL, media type, parser) into the catalogue. */
export function asGatewayError(error: FastifyError | Error, correlationId: string): GatewayError {
  if (error instanceof GatewayError) return error;
  const status = (error as FastifyError).statusCode;
  if (status === 413)
    return new GatewayError(Errors.GATEWAY_REQUEST_TOO_LARGE, { cause: 'The request body is too large.' });
  if (status === 415)
    return new GatewayError(Errors.GATEWAY_UNSUPPORTED_MEDIA_TYPE, {
      cause: 'The request content type is not supported here.',
    });
  if (status !== undefined && status >= 400 && status < 500) {
    return new GatewayError(Errors.GATEWAY_MALFORMED_REQUEST, {
      cause: `The request is malformed (${(error as FastifyError).code ?? 'bad request'}).`,
    });
  }
  return new GatewayError(
    Errors.GATEWAY_INTERNAL_ERROR,
    { cause: `An internal error occurred; the gateway log has the details under correlation id ${correlationId}.` },
    { cause: error },
  );
}

export function sendGatewayError(request: FastifyRequest, reply: FastifyReply, error: GatewayError): FastifyReply {
  request.errorCode = error.definition.code;
  if (error.reason !== undefined) request.refusalReason = error.reason;
  // Refused before its body was read whole (a 401 for an upload, say): Node would read the rest as
  // this connection's next bytes, and a body that then fails to parse drew a second, stray answer.
  if (reply.server.draining || !request.raw.complete) reply.header('connection', 'close');
  // The rest of a body still arriving is read and dropped after the answer, so the client reads it.
  if (!request.raw.complete) lingerAfterAnswer(request.raw);
  if (error.definition.plainText) {
    return reply
      .code(error.definition.status)
      .headers(error.headers)
      .type('text/plain; charset=UTF-8')
      .send(renderDecodeFailure(error.details));
  }
  const body = error.definition.routeNotFound
    ? renderRouteNotFound(error.details)
    : JSON.stringify(
        renderCantonError(error.definition, {
          ...error.details,
          correlationId: request.id,
          traceId: traceIdOf(request),
        }),
      );
  return reply.code(error.definition.status).headers(error.headers).type('application/json').send(body);
}

/** An upgrade's refusal, on its socket; the connection is always closed after it. */
/** The refusal's body (Canton's JsCantonError), noted on the exchange as its code and reason. */
export function refusalBody(exchange: Exchange, error: GatewayError): string {
  exchange.errorCode = error.definition.code;
  if (error.reason !== undefined) exchange.refusalReason = error.reason;
  return error.definition.routeNotFound
    ? renderRouteNotFound(error.details)
    : JSON.stringify(
        renderCantonError(error.definition, {
          ...error.details,
          correlationId: exchange.id,
          traceId: traceIdOf(exchange),
        }),
      );
}

export function writeUpgradeRefusal(exchange: Exchange, socket: Duplex, error: GatewayError): void {
  const body = refusalBody(exchange, error);
  const headers = [
    `HTTP/1.1 ${error.definition.status} ${http.STATUS_CODES[error.definition.status] ?? 'Error'}`,
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
    `x-request-id: ${exchange.id}`,
    ...(exchange.traceresponse === undefined ? [] : [`traceresponse: ${exchange.traceresponse}`]),
    ...Object.entries(error.headers)
      .filter(([name]) => name !== 'connection')
      .map(([name, value]) => `${name}: ${value}`), // always closed
  ];
  endUpgradeAnswer(socket, `${headers.join('\r\n')}\r\n\r\n${body}`);
}

/** How long a refused upgrade's socket may take to hand over its answer before it is destroyed. */
const REFUSAL_FLUSH_MS = 5_000;

/**
 * Ends a refused upgrade's connection, after `answer` when given. The API server keeps sockets
 * half-open, so `end()` alone left it open until the client closed its side: holding a protection
 * slot (released on close) and keeping shutdown waiting. Destroyed once the answer is flushed, or
 * after REFUSAL_FLUSH_MS.
 */
export function endUpgradeAnswer(socket: Duplex, answer?: string): void {
  const timer = setTimeout(() => socket.destroy(), REFUSAL_FLUSH_MS).unref();
  socket.once('close', () => clearTimeout(timer));
  if (answer === undefined) socket.end(() => socket.destroy());
  else socket.end(answer, () => socket.destroy());
}
