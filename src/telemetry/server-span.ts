// The server span of one request: opened by @fastify/otel in the first onRequest hook, closed by
// the gateway once the answer is complete (or the client went away), with the operation, the
// status and the error code on it.
import { TraceFlags, isSpanContextValid, type Attributes, type Span, type SpanContext } from '@opentelemetry/api';
import { isSampled, type TraceContext } from '../trace-context.js';

const kServerSpan = Symbol('ledger-gateway.serverSpan');

interface HeldSpan {
  readonly span: Span;
  readonly end: () => void;
}

type WithServerSpan = { [kServerSpan]?: HeldSpan };

/**
 * Called by @fastify/otel's requestHook right after it opens the span. @fastify/otel ends its span
 * in onSend, before a streamed answer has been written and before the participant's error code in
 * it has been read; so its end() is held back and the gateway ends the span in onResponse.
 */
export function holdServerSpan(request: object, span: Span): void {
  const end = span.end.bind(span);
  span.end = () => {};
  (request as WithServerSpan)[kServerSpan] = { span, end };
}

export function serverSpanOf(request: object): Span | undefined {
  return (request as WithServerSpan)[kServerSpan]?.span;
}

/** The server span's context, when tracing runs and the context is valid. */
export function serverSpanContextOf(request: object): SpanContext | undefined {
  const context = serverSpanOf(request)?.spanContext();
  return context !== undefined && isSpanContextValid(context) ? context : undefined;
}

/** The trace id (the server span's or the hand-propagated one), when the trace is sampled: only those are worth an exemplar. */
export function sampledTraceIdOf(request: object): string | undefined {
  const propagated = (request as { traceContext?: TraceContext }).traceContext;
  if (propagated !== undefined) return isSampled(propagated) ? propagated.traceId : undefined;
  const context = serverSpanContextOf(request);
  return context !== undefined && (context.traceFlags & TraceFlags.SAMPLED) !== 0 ? context.traceId : undefined;
}

export function endServerSpan(request: object, name: string, attributes: Attributes): void {
  const held = (request as WithServerSpan)[kServerSpan];
  if (held === undefined) return;
  (request as WithServerSpan)[kServerSpan] = undefined;
  held.span.updateName(name);
  held.span.setAttributes(attributes);
  held.end();
}

/**
 * The `traceresponse` header (W3C Trace Context Level 2, draft): version, trace id, the gateway's
 * server span id, flags. The trace id is the one the participant logs and puts in its errors.
 */
export function traceresponse(context: SpanContext): string {
  return `00-${context.traceId}-${context.spanId}-${(context.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}
