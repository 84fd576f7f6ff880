// Expect: 100-continue (RFC 9110 §10.1.1). Node's server sends 100 Continue the moment such a
// request arrives, before any stage has judged it, unless a 'checkContinue' listener takes over.
// The gateway takes over: the request walks its stages like any other, and 100 Continue goes out
// only when something starts reading the body (the policy stage's body reader, the forwarder).
// A call refused before that (token, protection, authorization, a declared length over the body
// limit) gets its final status instead, without the client sending the body; Node then closes the
// connection, as it does for any answer given without the 100 that was asked for.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { declaresBody } from '../body/read.js';

/** Defers the 100 Continue of `server`'s requests until their body is first read. */
export function deferContinue(server: Server): void {
  server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    // Nothing to wait for: no content is framed (RFC 9112 §6.3), so 100 costs nothing and keeps the connection.
    if (!declaresBody(request.headers)) response.writeContinue();
    else continueOnFirstRead(request, response);
    server.emit('request', request, response);
  });
}

/**
 * The first read of the body (a 'data' listener, pipe, resume or read() all call _read) sends
 * 100 Continue, unless the final answer has been sent already: Node drains the unread body of an
 * answered request, and a 100 after the answer would be a stray response on the connection.
 */
function continueOnFirstRead(request: IncomingMessage, response: ServerResponse): void {
  // Kept unbound on purpose: it is put back as-is and called with the stream as `this` below.
  // eslint-disable-next-line @typescript-eslint/unbound-method
  const read = request._read;
  request._read = function readAfterContinue(this: IncomingMessage, size: number): void {
    request._read = read;
    if (!response.headersSent) response.writeContinue();
    read.call(this, size);
  };
}
