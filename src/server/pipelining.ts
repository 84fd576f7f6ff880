// Pipelined requests (RFC 9112 §9.3.2): Node's server hands over every request of a connection as
// soon as it is parsed, while the answers before it are still being made, and only writes its answer
// in turn. A request behind an answer that closes the connection (a refusal that ends it: a 401, a
// 404, a dot-segment 400) would still walk its stages and reach the participant, its answer dropped;
// a client retrying it, as RFC 9112 §9.3.2 allows, then runs it twice. So a request queued behind
// another is dispatched only when its own answer's turn comes: Node gives the connection to the next
// response only when the one before it ended and kept the connection open.
//
// Node parses a connection's bytes as fast as they arrive and keeps every request it parsed (about
// 1.6 KB of heap each) until its turn: 100,000 pipelined GETs on one connection ran the heap out. So
// the requests waiting for their turn are bounded, as nginx bounds them by reading one request at a
// time: at limits.pipelining's marks a connection is not read until an answer frees a place (TCP
// backpressure); what one read already held (at most 64 KiB) still queues. All connections together
// are bounded too: a request that would pass the process's bound closes its connection at once,
// which frees everything it queued (none of it was run).
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

type RequestListener = (request: IncomingMessage, response: ServerResponse) => void;

export interface PipelineLimits {
  /** Requests one connection may have waiting for their turn before it is not read further. */
  readonly maxRequests: number;
  /** Bytes of their heads one connection may have waiting before it is not read further. */
  readonly maxBytes: number;
  /** Requests waiting in all connections together; one more closes its connection. */
  readonly totalRequests: number;
  /** Bytes of their heads waiting in all connections together; more closes the connection. */
  readonly totalBytes: number;
}

/** What waits now, all connections together, and how many connections were closed for passing the total. */
export interface PipelineQueues {
  readonly requests: number;
  readonly bytes: number;
  readonly cuts: number;
}

/** One connection's requests waiting for their turn. */
interface Line {
  requests: number;
  bytes: number;
}

const kLine = Symbol('ledger-gateway.pipelineLine');

/**
 * A connection as Node's HTTP server sees it. Stopping a connection's reads takes Node's own way, the
 * one it uses when a client does not read its answers: `_paused` set (and the socket paused) makes it
 * pause the socket's parser once the read in progress is parsed; socket.pause() alone stops nothing,
 * as the parser reads the socket's handle directly.
 */
type Connection = Socket & { [kLine]?: Line; _paused?: boolean; parser?: { resume(): void } | null };

function stopReading(socket: Connection): void {
  if (socket._paused === true) return;
  socket._paused = true;
  socket.pause();
}

function readAgain(socket: Connection): void {
  socket._paused = false;
  socket.parser?.resume();
  socket.resume();
}

/** The bytes of a request's head as received: request line, field lines (Node keeps them as latin1 text, a byte a character). */
function headBytes(request: IncomingMessage): number {
  let bytes = request.method!.length + request.url!.length + 12; // ' ', ' HTTP/1.1\r\n'
  const raw = request.rawHeaders;
  for (let i = 0; i < raw.length; i++) bytes += raw[i]!.length + 2; // ': ' or '\r\n'
  return bytes + 2;
}

/**
 * Makes `server`'s 'request' listeners (Fastify's) wait, for a pipelined request, until its answer's
 * turn, and bounds what waits by `limits`; returns what waits now, for the metrics.
 */
export function dispatchInTurn(server: Server, limits: PipelineLimits): PipelineQueues {
  const listeners = server.listeners('request') as RequestListener[];
  server.removeAllListeners('request');
  const dispatch: RequestListener = (request, response) => {
    for (const listener of listeners) listener.call(server, request, response);
  };
  const totals = { requests: 0, bytes: 0, cuts: 0 };

  const lineOf = (socket: Connection): Line => {
    let line = socket[kLine];
    if (line === undefined) {
      line = socket[kLine] = { requests: 0, bytes: 0 };
      const counted = line;
      // Requests still waiting when the connection closes never get their turn.
      socket.once('close', () => {
        totals.requests -= counted.requests;
        totals.bytes -= counted.bytes;
        counted.requests = counted.bytes = 0;
      });
    }
    return line;
  };
  const full = (line: Line) => line.requests >= limits.maxRequests || line.bytes >= limits.maxBytes;

  const queue: RequestListener = (request, response) => {
    const socket = request.socket as Connection;
    if (socket.destroyed) return; // closed for passing the total while the rest of its read was parsed
    const bytes = headBytes(request);
    if (totals.requests + 1 > limits.totalRequests || totals.bytes + bytes > limits.totalBytes) {
      totals.cuts += 1;
      socket.destroy();
      return;
    }
    const line = lineOf(socket);
    line.requests += 1;
    line.bytes += bytes;
    totals.requests += 1;
    totals.bytes += bytes;
    if (full(line)) stopReading(socket);
    response.once('socket', () => {
      const wasFull = full(line);
      line.requests -= 1;
      line.bytes -= bytes;
      totals.requests -= 1;
      totals.bytes -= bytes;
      // Read again once a place is free, unless the client is not reading its answers: Node then
      // reads again itself on 'drain'.
      if (wasFull && !full(line) && socket._paused === true && !socket.writableNeedDrain) readAgain(socket);
      dispatch(request, response);
    });
  };

  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    // A response without a socket is queued behind an earlier one of the same connection; it gets
    // the socket (and 'socket') only if every answer before it kept the connection open.
    if (response.socket === null) queue(request, response);
    else if (response.socket.writable) dispatch(request, response);
    // Node gives a request parsed after the answer before it closed the connection (ended, not yet
    // destroyed) the socket at once: it must not run, and nothing more is read.
    else stopReading(response.socket);
  });
  return totals;
}
