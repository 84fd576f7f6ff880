// What every call of one forwarder shares: the replicas, the connection slots, each operation's
// timeout and the headers sent upstream. Built once by createForwarder (forward.ts).
import { performance } from 'node:perf_hooks'; // a module binding: no global lookup per call
import type { FastifyRequest } from 'fastify';
import { Errors, GatewayError } from '../errors.js';
import type { UpstreamReplicas } from './upstream-replicas.js';
import type { UpstreamSlots } from './upstream-slots.js';

export interface CallContext {
  readonly replicas: UpstreamReplicas;
  /** Every call waits for a slot at most until its deadline (upstream-slots.ts). */
  readonly slots: UpstreamSlots;
  /** upstream.timeoutMs, or its operation's: bounds the wait for a slot, the answer's head, each pause in its body. */
  timeoutOf(request: FastifyRequest): number;
  /** The request's headers as sent upstream, without those named in `drop`. */
  headersFor(request: FastifyRequest, drop?: ReadonlySet<string>): string[];
  /** Called with the upstream part of each call, for the upstream latency histogram. */
  readonly onUpstreamTiming?: (request: FastifyRequest, seconds: number) => void;
}

/** What is left of a call's timeout (at least 1 ms). */
export function remaining(started: number, timeout: number): number {
  return Math.max(1, Math.ceil(started + timeout - performance.now()));
}

export function queueTimeout(connections: number, timeout: number): GatewayError {
  return new GatewayError(
    Errors.GATEWAY_UPSTREAM_UNAVAILABLE,
    { cause: 'No connection to the participant became free in time.' },
    { reason: `QUEUE_TIMEOUT: every one of the ${connections} upstream connections stayed busy for ${timeout} ms` },
  );
}

/** A connection that was lost before the participant answered anything. */
export const CONNECTION_LOST: ReadonlySet<string> = new Set([
  'UND_ERR_SOCKET',
  'ECONNRESET',
  'EPIPE',
  'UND_ERR_CLOSED',
]);
