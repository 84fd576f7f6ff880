// Answers written straight to the client's socket, past Fastify's send path (no onSend hooks, no
// payload checks): the forwarder's streamed answers and the version cache's stored ones.
import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';

export type AnswerHeaders = Record<string, string | string[] | number>;

/**
 * The gateway's own headers for an answer it writes itself (forwarded, or a cached version): the
 * request id, `traceresponse` when tracing runs and, when a stage put headers on the reply for every
 * answer (CORS: request.replyHeaders), the reply's headers. A fresh object: the answer's
 * headers are added to it. Built from the request rather than read back from the reply:
 * reply.getHeaders() and reply.header() cost more (docs/performance.md). Answers Fastify sends
 * (refusals, preflights) get the same two headers in the API's onSend hook (app.ts).
 */
export function gatewayHeaders(request: FastifyRequest, reply: FastifyReply): AnswerHeaders {
  const head: AnswerHeaders = { 'x-request-id': request.id };
  if (request.traceresponse !== undefined) head.traceresponse = request.traceresponse;
  return request.replyHeaders ? Object.assign(head, reply.getHeaders() as AnswerHeaders) : head;
}

/**
 * The participant's Vary with the gateway's own (CORS adds Origin) joined to it: an answer varies by
 * both. Unchanged when the participant's already lists it, or is `*` (RFC 9110 §12.5.5).
 */
export function combinedVary(participant: string | string[], own: string): string {
  const listed = Array.isArray(participant) ? participant.join(', ') : participant;
  const names = listed.split(',').map((name) => name.trim().toLowerCase());
  return names.includes('*') || names.includes(own.toLowerCase()) ? listed : `${listed}, ${own}`;
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
  const length = head['content-length'];
  reply.request.answerContentLength = Array.isArray(length) ? undefined : length;
  reply.hijack();
  return reply.raw;
}
