// W3C Trace Context by hand, for when no span leaves the process (no exporter configured): the
// gateway continues the caller's trace (or starts one), takes a span id of its own for its hop,
// gives the participant one traceparent naming that hop, and returns it in `traceresponse`. The
// OpenTelemetry SDK would create, then drop, two spans per request for the same headers.
// https://www.w3.org/TR/trace-context/ (traceparent); traceresponse: Trace Context Level 2, draft.
import { randomFillSync } from 'node:crypto';

/** One request's place in a trace: what the participant and the client are told. */
export interface TraceContext {
  /** 32 lower-case hex digits, not all zero. */
  readonly traceId: string;
  /** The gateway's hop: 16 lower-case hex digits, not all zero. */
  readonly spanId: string;
  /** Two lower-case hex digits (01: sampled). */
  readonly flags: string;
}

// version 00 - trace id - parent id - flags, lower-case hex only (W3C Trace Context §3.2.2).
const TRACEPARENT = /^00-([\da-f]{32})-([\da-f]{16})-([\da-f]{2})$/;
const ZERO_TRACE_ID = '0'.repeat(32);
const ZERO_SPAN_ID = '0'.repeat(16);
const SAMPLED = '01';

// Random ids from a pooled buffer: one randomFillSync per 512 ids instead of a call per id.
const POOL_BYTES = 4096;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let poolOffset = POOL_BYTES;

function randomHex(bytes: number): string {
  if (poolOffset + bytes > POOL_BYTES) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const hex = pool.toString('hex', poolOffset, poolOffset + bytes);
  poolOffset += bytes;
  return hex;
}

/** A fresh 16-byte trace id (never all zero). */
export function newTraceId(): string {
  let id = randomHex(16);
  while (id === ZERO_TRACE_ID) id = randomHex(16);
  return id;
}

/** A fresh 8-byte span id (never all zero). */
export function newSpanId(): string {
  let id = randomHex(8);
  while (id === ZERO_SPAN_ID) id = randomHex(8);
  return id;
}

/** The caller's traceparent, parsed; undefined when absent, repeated or not valid (then a new trace starts). */
export function parseTraceparent(header: string | string[] | undefined): { traceId: string; parentId: string; flags: string } | undefined {
  if (typeof header !== 'string' || header.length !== 55) return undefined;
  const match = TRACEPARENT.exec(header);
  if (match === null) return undefined;
  const [, traceId, parentId, flags] = match as unknown as [string, string, string, string];
  if (traceId === ZERO_TRACE_ID || parentId === ZERO_SPAN_ID) return undefined;
  return { traceId, parentId, flags };
}

/** The gateway's hop in the caller's trace, or in a new sampled trace when the caller sent none. */
export function continueTrace(traceparentHeader: string | string[] | undefined): TraceContext {
  const parent = parseTraceparent(traceparentHeader);
  return parent === undefined
    ? { traceId: newTraceId(), spanId: newSpanId(), flags: SAMPLED }
    : { traceId: parent.traceId, spanId: newSpanId(), flags: parent.flags };
}

/** The traceparent for the participant, and the traceresponse for the client: the same value. */
export function formatTraceparent(context: TraceContext): string {
  return `00-${context.traceId}-${context.spanId}-${context.flags}`;
}

/** Whether the trace is sampled (the flags' low bit): only those are worth an exemplar. */
export function isSampled(context: TraceContext): boolean {
  return (Number.parseInt(context.flags, 16) & 1) === 1;
}
