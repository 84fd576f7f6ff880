// Requests Node's HTTP parser refuses before any route runs (malformed framing, conflicting
// Content-Length, Transfer-Encoding with Content-Length, oversized heads, slow clients): answered in
// Canton's shape on the raw socket, then the connection is closed.
import http from 'node:http';
import type { Duplex } from 'node:stream';
import { Errors, renderCantonError, type ErrorDefinition } from '../errors.js';

export function clientErrorDefinition(code: string | undefined): ErrorDefinition {
  if (code === 'HPE_HEADER_OVERFLOW') return Errors.GATEWAY_HEADERS_TOO_LARGE;
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return Errors.GATEWAY_CLIENT_TIMEOUT;
  return Errors.GATEWAY_MALFORMED_REQUEST;
}

/**
 * The whole HTTP answer for a parser refusal; never echoes the client's bytes. With a request id, it
 * is the body's correlationId and the x-request-id header, as on every other answer.
 */
export function clientErrorResponse(code: string | undefined, requestId?: string): string {
  const definition = clientErrorDefinition(code);
  const cause =
    definition === Errors.GATEWAY_MALFORMED_REQUEST
      ? `The request is not valid HTTP/1.1 (${code ?? 'parse error'}).`
      : definition.description;
  return rawRefusal(definition, cause, requestId);
}

/** A coded refusal as a whole HTTP/1.1 answer that closes its connection, for a socket no response object serves. */
export function rawRefusal(definition: ErrorDefinition, cause: string, requestId?: string): string {
  const body = JSON.stringify(
    renderCantonError(definition, { cause, ...(requestId !== undefined && { correlationId: requestId }) }),
  );
  const id = requestId === undefined ? '' : `X-Request-Id: ${requestId}\r\n`;
  return `HTTP/1.1 ${definition.status} ${http.STATUS_CODES[definition.status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${id}Connection: close\r\n\r\n${body}`;
}

/** A parser refusal that had no request of its own: what its metric and log line need. */
export interface ClientErrorRefusal {
  readonly definition: ErrorDefinition;
  readonly requestId: string;
  /** Node's parser code (HPE_*, ERR_HTTP_REQUEST_TIMEOUT): the log line's reason. */
  readonly reason: string;
}

/**
 * The server's clientError handler; `onAnswered` counts and logs each refusal that has no request
 * of its own to label (`newRequestId` gives it an id), a request pipelined behind a call in flight
 * included. One that strikes a request already under way (its client left mid-body, or its body
 * took longer than server.requestTimeoutMs) is counted once, as that request, when its response closes.
 */
export function createClientErrorHandler(
  onAnswered: (refusal: ClientErrorRefusal) => void,
  newRequestId: () => string,
) {
  return (error: Error & { code?: string }, socket: Duplex): void => {
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    // Node's own link from a connection to the response it is serving (set while one is under way).
    const underWay =
      (socket as { _httpMessage?: { headersSent?: boolean; req?: { complete?: boolean } } | null })._httpMessage ??
      undefined;
    if (error.code === 'HPE_CLOSED_CONNECTION') {
      // Bytes after a request that said `Connection: close` (RFC 9112 §9.6): that request is the
      // connection's last, and its answer, which closes it, is still owed. Nothing more is read.
      if (underWay === undefined) socket.destroy();
      else socket.pause();
      return;
    }
    // A request pipelined behind one whose whole request was read is a later one: an answer now would
    // be read as the answer to the earlier call (HTTP/1.1 answers in order), so the connection is
    // closed without one, and the refusal is counted and logged as its own request.
    const later = underWay?.req?.complete === true;
    // Never a second answer after one whose head is already on the wire (as Node's default handler).
    const answer = socket.writable && underWay?.headersSent !== true && !later;
    const requestId = underWay === undefined || later ? newRequestId() : undefined;
    if (answer) socket.end(clientErrorResponse(error.code, requestId));
    if (requestId !== undefined)
      onAnswered({ definition: clientErrorDefinition(error.code), requestId, reason: error.code ?? 'parse error' });
    socket.destroy();
  };
}
