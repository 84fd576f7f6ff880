// Pipelined requests (RFC 9112 §9.3.2): Node's server hands over every request of a connection as
// soon as it is parsed, while the answers before it are still being made, and only writes its answer
// in turn. A request behind an answer that closes the connection (a refusal that ends it: a 401, a
// 404, a dot-segment 400) would still walk its stages and reach the participant, its answer dropped;
// a client retrying it, as RFC 9112 §9.3.2 allows, then runs it twice. So a request queued behind
// another is dispatched only when its own answer's turn comes: Node gives the connection to the next
// response only when the one before it ended and kept the connection open.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';

type RequestListener = (request: IncomingMessage, response: ServerResponse) => void;

/** Makes `server`'s 'request' listeners (Fastify's) wait, for a pipelined request, until its answer's turn. */
export function dispatchInTurn(server: Server): void {
  const listeners = server.listeners('request') as RequestListener[];
  server.removeAllListeners('request');
  const dispatch: RequestListener = (request, response) => {
    for (const listener of listeners) listener.call(server, request, response);
  };
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    // A response without a socket is queued behind an earlier one of the same connection; it gets
    // the socket (and 'socket') only if every answer before it kept the connection open.
    if (response.socket !== null) dispatch(request, response);
    else response.once('socket', () => dispatch(request, response));
  });
}
