// Requests Node's HTTP parser refuses before any route runs (malformed framing, conflicting
// Content-Length, Transfer-Encoding with Content-Length, oversized heads, slow clients): answered in
// Canton's shape on the raw socket, then the connection is closed.
import http from 'node:http';
import type { Duplex } from 'node:stream';
import { Errors, renderCantonError, type ErrorDefinition } from './errors.js';

export function clientErrorDefinition(code: string | undefined): ErrorDefinition {
  if (code === 'HPE_HEADER_OVERFLOW') return Errors.GATEWAY_HEADERS_TOO_LARGE;
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return Errors.GATEWAY_CLIENT_TIMEOUT;
  return Errors.GATEWAY_MALFORMED_REQUEST;
}

/** The whole HTTP answer for a parser refusal; never echoes the client's bytes. */
export function clientErrorResponse(code: string | undefined): string {
  const definition = clientErrorDefinition(code);
  const cause = definition === Errors.GATEWAY_MALFORMED_REQUEST
    ? `The request is not valid HTTP/1.1 (${code ?? 'parse error'}).`
    : definition.description;
  const body = JSON.stringify(renderCantonError(definition, { cause }));
  return `HTTP/1.1 ${definition.status} ${http.STATUS_CODES[definition.status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

/** The server's clientError handler; `onAnswered` counts each refusal (there is no request to label). */
export function createClientErrorHandler(onAnswered: (definition: ErrorDefinition) => void) {
  return (error: Error & { code?: string }, socket: Duplex): void => {
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    if (socket.writable) {
      socket.end(clientErrorResponse(error.code));
      onAnswered(clientErrorDefinition(error.code));
    }
    socket.destroy();
  };
}
