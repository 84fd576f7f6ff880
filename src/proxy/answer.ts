// Answers written straight to the client's socket, past Fastify's send path (no onSend hooks, no
// payload checks): the forwarder's streamed answers and the version cache's stored ones.
import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';

export type AnswerHeaders = Record<string, string | string[] | number>;

/** The gateway's own headers on the reply (x-request-id, traceresponse, CORS): an answer's are added to these. */
export function gatewayHeaders(reply: FastifyReply): AnswerHeaders {
  return reply.getHeaders() as AnswerHeaders;
}

/**
 * Writes the answer head and hijacks the reply: `head` holds the gateway's own headers already on the
 * reply (gatewayHeaders) with the answer's added, which win on a clash. A head Node refuses throws
 * before the reply is hijacked, so the caller can still answer with a coded error. While the
 * gateway drains (shutdown), the answer closes its connection. Fastify's onResponse hooks still run
 * once the answer is finished.
 */
export function writeAnswerHead(reply: FastifyReply, statusCode: number, head: AnswerHeaders): ServerResponse {
  if (reply.server.draining) head.connection = 'close';
  reply.raw.writeHead(statusCode, head);
  reply.hijack();
  return reply.raw;
}
