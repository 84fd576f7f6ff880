// Trace context for a hop that has no span of its own (no exporter configured, or a WebSocket
// upgrade): the gateway continues the caller's trace (or starts one), takes a span id of its own
// for its hop, hands the participant that context in every format OTEL_PROPAGATORS names, and
// returns it to the client in `traceresponse` (W3C Trace Context Level 2, draft). Headers are read
// and written by OpenTelemetry's own propagators (@opentelemetry/core, @opentelemetry/propagator-b3),
// the ones the SDK uses when it exports; OTEL_PROPAGATORS is read as the SDK reads it.
// https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/#general-sdk-configuration
import { randomFillSync } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import {
  ROOT_CONTEXT,
  TraceFlags,
  defaultTextMapGetter,
  isSpanContextValid,
  trace,
  type Context,
  type TextMapPropagator,
  type TextMapSetter,
} from '@opentelemetry/api';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { B3InjectEncoding, B3Propagator } from '@opentelemetry/propagator-b3';

/** One request's place in a trace: what the participant and the client are told. */
export interface TraceContext {
  /** 32 lower-case hex digits, not all zero. */
  readonly traceId: string;
  /** The gateway's hop: 16 lower-case hex digits, not all zero. */
  readonly spanId: string;
  /** W3C trace flags (bit 0: sampled). */
  readonly flags: number;
  /** Whether the caller's trace was continued (false: it sent none the propagators read; one started here). */
  readonly continued: boolean;
  /** What the propagators inject upstream: the gateway's hop, with the caller's tracestate and baggage. */
  readonly context: Context;
}

/** The propagators OTEL_PROPAGATORS can name, as the SDK builds them (jaeger is deprecated there and not offered). */
const PROPAGATORS: Readonly<Record<string, () => TextMapPropagator>> = {
  tracecontext: () => new W3CTraceContextPropagator(),
  baggage: () => new W3CBaggagePropagator(),
  b3: () => new B3Propagator({ injectEncoding: B3InjectEncoding.SINGLE_HEADER }),
  b3multi: () => new B3Propagator({ injectEncoding: B3InjectEncoding.MULTI_HEADER }),
};

const DEFAULT_PROPAGATORS = ['tracecontext', 'baggage'];

/** The headers a propagator reads (lower case): the B3 propagator reads both encodings, whichever it writes. */
function fieldsRead(name: string): string[] {
  const names = name === 'b3' || name === 'b3multi' ? ['b3', 'b3multi'] : [name];
  return names.flatMap((one) => PROPAGATORS[one]!().fields()).map((field) => field.toLowerCase());
}

export interface ConfiguredPropagation {
  readonly propagator: TextMapPropagator;
  /** The names in use, in order; empty for `none`. */
  readonly names: readonly string[];
  /** Names given that no propagator answers to (ignored, as the SDK ignores them). */
  readonly unknown: readonly string[];
  /** Every header the propagators read (lower case): a client's copies are replaced, never sent beside the gateway's. */
  readonly fields: ReadonlySet<string>;
  readonly fieldList: readonly string[];
  /** W3C's propagators only (tracecontext, with or without baggage): for a trace started here they write its traceparent alone. */
  readonly w3cOnly: boolean;
}

/** OTEL_PROPAGATORS read as the SDK reads it: unset or empty is tracecontext,baggage; `none` anywhere turns it off. */
export function propagationFromEnvironment(env: NodeJS.ProcessEnv): ConfiguredPropagation {
  const listed = (env.OTEL_PROPAGATORS ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '');
  const requested = [...new Set(listed.length === 0 ? DEFAULT_PROPAGATORS : listed)];
  const unknown = requested.filter((name) => name !== 'none' && PROPAGATORS[name] === undefined);
  const names = requested.includes('none') ? [] : requested.filter((name) => PROPAGATORS[name] !== undefined);
  const fieldList = [...new Set(names.flatMap(fieldsRead))];
  return {
    propagator: new CompositePropagator({ propagators: names.map((name) => PROPAGATORS[name]!()) }),
    names,
    unknown,
    fields: new Set(fieldList),
    fieldList,
    w3cOnly: names.includes('tracecontext') && names.every((name) => name === 'tracecontext' || name === 'baggage'),
  };
}

let configured: ConfiguredPropagation | undefined;

/** The process's propagation, from OTEL_PROPAGATORS when first asked for (tracing.ts gives the SDK the same one). */
export function configuredPropagation(): ConfiguredPropagation {
  configured ??= propagationFromEnvironment(process.env);
  return configured;
}

/** The header names the propagators read (lower case): the client's copies are replaced, never sent beside ours. */
export function traceContextFields(): ReadonlySet<string> {
  return configuredPropagation().fields;
}

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

const ZERO_TRACE_ID = '0'.repeat(32);
const ZERO_SPAN_ID = '0'.repeat(16);

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

/**
 * A trace started here for a call that carried no header the propagators read: nothing was extracted,
 * so its OpenTelemetry context (the hop's span context on the root) is built only when a propagator
 * other than W3C's asks for it; W3C's would write its traceparent alone (injectTraceContext).
 */
class StartedTrace implements TraceContext {
  readonly flags: number = TraceFlags.SAMPLED;
  readonly continued = false;
  private built: Context | undefined;

  constructor(
    readonly traceId: string,
    readonly spanId: string,
  ) {}

  get context(): Context {
    this.built ??= trace.setSpanContext(ROOT_CONTEXT, {
      traceId: this.traceId,
      spanId: this.spanId,
      traceFlags: this.flags,
    });
    return this.built;
  }
}

/** The gateway's hop in the caller's trace, or in a new sampled one when the caller sent none the propagators read. */
export function continueTrace(
  headers: IncomingHttpHeaders,
  propagation: ConfiguredPropagation = configuredPropagation(),
): TraceContext {
  // Most calls carry no trace header at all: then there is nothing to extract.
  if (!carriesAny(headers, propagation.fieldList)) return new StartedTrace(newTraceId(), newSpanId());
  const extracted = propagation.propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
  const parent = trace.getSpanContext(extracted);
  const continued = parent !== undefined && isSpanContextValid(parent);
  const traceId = continued ? parent.traceId : newTraceId();
  const spanId = newSpanId();
  const flags = continued ? parent.traceFlags : TraceFlags.SAMPLED;
  // A new trace takes no tracestate: the caller's belongs to a trace the participant never hears of
  // (W3C Trace Context §3.3). Baggage is not tied to a trace and goes on either way.
  const context = trace.setSpanContext(extracted, {
    traceId,
    spanId,
    traceFlags: flags,
    ...(continued && parent.traceState !== undefined && { traceState: parent.traceState }),
  });
  return { traceId, spanId, flags, continued, context };
}

function carriesAny(headers: IncomingHttpHeaders, fields: readonly string[]): boolean {
  for (const field of fields) if (headers[field] !== undefined) return true;
  return false;
}

/** Appends to a flat [name, value, ...] header list. */
const headerListSetter: TextMapSetter<string[]> = {
  set(carrier, key, value) {
    carrier.push(key, value);
  },
};

/** Appends the propagators' headers for the gateway's hop to a flat [name, value, ...] list of request headers. */
export function injectTraceContext(
  context: TraceContext,
  headers: string[],
  propagation: ConfiguredPropagation = configuredPropagation(),
): void {
  // A trace started here has no tracestate and no baggage: W3C's propagators would write its traceparent
  // alone, in the syntax formatTraceparent writes (W3C Trace Context §3.2).
  if (context instanceof StartedTrace && propagation.w3cOnly) headers.push('traceparent', formatTraceparent(context));
  else propagation.propagator.inject(context.context, headers, headerListSetter);
}

/** The traceresponse for the client: W3C traceparent syntax, whatever the propagators. */
export function formatTraceparent(context: TraceContext): string {
  return `00-${context.traceId}-${context.spanId}-${context.flags < 16 ? '0' : ''}${context.flags.toString(16)}`;
}

const SAMPLED_BIT: number = TraceFlags.SAMPLED;

/** Whether the trace is sampled (the flags' low bit): only those are worth an exemplar. */
export function isSampled(context: TraceContext): boolean {
  return (context.flags & SAMPLED_BIT) !== 0;
}

const TRACEPARENT = /^[\da-f]{2}-([\da-f]{32})-[\da-f]{16}-[\da-f]{2}$/;

/** The trace id of a W3C traceparent header, or null when absent or invalid. */
export function traceIdFromHeader(header: string | string[] | undefined): string | null {
  const match = typeof header === 'string' ? TRACEPARENT.exec(header) : null;
  return match?.[1] !== undefined && !/^0+$/.test(match[1]) ? match[1] : null;
}

/**
 * The W3C trace id of a request (an exchange): its hand-propagated context's, the active span's, else
 * the caller's traceparent's; null without any. For errors' traceId and lines that have no span.
 */
export function traceIdOf(request: {
  readonly traceContext: TraceContext | undefined;
  readonly raw: { readonly headers: IncomingHttpHeaders };
}): string | null {
  if (request.traceContext !== undefined) return request.traceContext.traceId;
  const spanContext = trace.getActiveSpan()?.spanContext();
  if (spanContext !== undefined && isSpanContextValid(spanContext)) return spanContext.traceId;
  return traceIdFromHeader(request.raw.headers.traceparent);
}
