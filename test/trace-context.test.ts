// Trace context without spans (no exporter, or a WebSocket upgrade): OTEL_PROPAGATORS read as the
// SDK reads it, the caller's trace continued in any configured format with a span id of the
// gateway's own, the hop handed on in every configured format, and ids random and never zero.
import type { IncomingHttpHeaders } from 'node:http';
import { describe, expect, it } from 'vitest';
import {
  continueTrace,
  formatTraceparent,
  injectTraceContext,
  isSampled,
  newSpanId,
  newTraceId,
  propagationFromEnvironment,
} from '../src/trace-context.js';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT_ID = '00f067aa0ba902b7';
const TRACEPARENT = /^00-([\da-f]{32})-([\da-f]{16})-([\da-f]{2})$/;

const propagationOf = (names: string) => propagationFromEnvironment({ OTEL_PROPAGATORS: names });
const propagatorOf = (names: string) => propagationOf(names).propagator;

/** The headers the participant would be sent, as a name -> values map. */
function injected(
  headers: IncomingHttpHeaders,
  names: string,
): { context: ReturnType<typeof continueTrace>; sent: Map<string, string[]> } {
  const propagation = propagationOf(names);
  const context = continueTrace(headers, propagation);
  const list: string[] = [];
  injectTraceContext(context, list, propagation);
  const sent = new Map<string, string[]>();
  for (let i = 0; i < list.length; i += 2) sent.set(list[i]!, [...(sent.get(list[i]!) ?? []), list[i + 1]!]);
  return { context, sent };
}

describe('OTEL_PROPAGATORS', () => {
  it('is read as the OpenTelemetry SDK reads it', () => {
    expect(propagationFromEnvironment({}).names).toEqual(['tracecontext', 'baggage']);
    expect(propagationFromEnvironment({ OTEL_PROPAGATORS: ' ' }).names).toEqual(['tracecontext', 'baggage']);
    expect(propagationFromEnvironment({ OTEL_PROPAGATORS: 'b3, tracecontext,b3' }).names).toEqual([
      'b3',
      'tracecontext',
    ]);
    expect(propagationFromEnvironment({ OTEL_PROPAGATORS: 'B3MULTI' }).names).toEqual(['b3multi']);
    expect(propagationFromEnvironment({ OTEL_PROPAGATORS: 'tracecontext,none' }).names).toEqual([]);
    expect(propagationFromEnvironment({ OTEL_PROPAGATORS: 'tracecontext,jaeger,xray' })).toMatchObject({
      names: ['tracecontext'],
      unknown: ['jaeger', 'xray'],
    });
  });

  it("owns every header its formats read (the client's copies are replaced): B3 in both encodings", () => {
    expect(propagationOf('tracecontext,baggage').fields).toEqual(new Set(['traceparent', 'tracestate', 'baggage']));
    const b3 = ['b3', 'x-b3-traceid', 'x-b3-spanid', 'x-b3-sampled', 'x-b3-flags', 'x-b3-parentspanid'];
    expect(propagationOf('b3').fields).toEqual(new Set(b3));
    expect(propagationOf('b3multi').fields).toEqual(new Set(b3));
    expect(propagatorOf('b3').fields()).toEqual(['b3']); // what it writes
    expect(propagationOf('none').fields).toEqual(new Set());
  });
});

describe('continueTrace (W3C tracecontext, the default)', () => {
  it("continues the caller's trace with a new span id of the gateway's, keeping the flags and the tracestate", () => {
    const { context, sent } = injected(
      { traceparent: `00-${TRACE_ID}-${PARENT_ID}-00`, tracestate: 'vendor=opaque', baggage: 'tenant=acme' },
      'tracecontext,baggage',
    );
    expect(context).toMatchObject({ traceId: TRACE_ID, flags: 0, continued: true });
    expect(context.spanId).toMatch(/^[\da-f]{16}$/);
    expect(context.spanId).not.toBe(PARENT_ID);
    expect(isSampled(context)).toBe(false);
    expect(sent.get('traceparent')).toEqual([`00-${TRACE_ID}-${context.spanId}-00`]);
    expect(sent.get('tracestate')).toEqual(['vendor=opaque']);
    expect(sent.get('baggage')).toEqual(['tenant=acme']);
  });

  it("starts a new sampled trace when the caller sent none or an invalid one, without the caller's tracestate", () => {
    for (const traceparent of [
      undefined,
      'garbage',
      `00-${'0'.repeat(32)}-${PARENT_ID}-01`,
      `00-${TRACE_ID}-${PARENT_ID}-01, 00-${TRACE_ID}-${PARENT_ID}-01`,
    ]) {
      const { context, sent } = injected(
        { ...(traceparent !== undefined && { traceparent }), tracestate: 'vendor=opaque', baggage: 'tenant=acme' },
        'tracecontext,baggage',
      );
      expect(context.continued, traceparent).toBe(false);
      expect(context.traceId).toMatch(/^[\da-f]{32}$/);
      expect(context.traceId).not.toBe(TRACE_ID);
      expect(isSampled(context)).toBe(true);
      expect(sent.get('traceparent')).toEqual([formatTraceparent(context)]);
      expect(sent.has('tracestate')).toBe(false);
      expect(sent.get('baggage')).toEqual(['tenant=acme']); // baggage belongs to no trace
    }
  });

  it('hands on a trace started for a call with no trace header exactly as the configured propagators write it', () => {
    for (const names of [
      'tracecontext,baggage',
      'tracecontext',
      'baggage,tracecontext',
      'b3',
      'b3multi,tracecontext',
    ]) {
      const { context, sent } = injected({}, names);
      const written: string[] = [];
      propagatorOf(names).inject(context.context, written, {
        set: (carrier, key, value) => void carrier.push(key, value),
      });
      expect(
        [...sent].flatMap(([name, values]) => values.flatMap((value) => [name, value])),
        names,
      ).toEqual(written);
      expect(written.length, names).toBeGreaterThan(0);
    }
    expect(injected({}, 'tracecontext,baggage').sent).toEqual(
      new Map([['traceparent', [expect.stringMatching(TRACEPARENT) as string]]]),
    );
  });

  it("formats the gateway's hop as a valid traceparent (the traceresponse)", () => {
    const context = continueTrace({ traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` }, propagationOf('tracecontext'));
    expect(formatTraceparent(context)).toMatch(TRACEPARENT);
    expect(formatTraceparent(context)).toBe(`00-${TRACE_ID}-${context.spanId}-01`);
  });
});

describe('continueTrace with B3', () => {
  it('reads a B3 single header and hands the same trace on in B3 single, B3 multi and W3C, as configured', () => {
    const b3 = { b3: `${TRACE_ID}-${PARENT_ID}-1` };
    const { context, sent } = injected(b3, 'b3,b3multi,tracecontext');
    expect(context).toMatchObject({ traceId: TRACE_ID, continued: true });
    expect(sent.get('b3')).toEqual([`${TRACE_ID}-${context.spanId}-1`]);
    expect(sent.get('x-b3-traceid')).toEqual([TRACE_ID]);
    expect(sent.get('x-b3-spanid')).toEqual([context.spanId]);
    expect(sent.get('x-b3-sampled')).toEqual(['1']);
    expect(sent.get('traceparent')).toEqual([`00-${TRACE_ID}-${context.spanId}-01`]);
  });

  it('reads B3 multi headers when it writes the single header (the gateway never skips what it can read)', () => {
    const multi = { 'x-b3-traceid': TRACE_ID, 'x-b3-spanid': PARENT_ID, 'x-b3-sampled': '1' };
    const { context, sent } = injected(multi, 'b3');
    expect(context).toMatchObject({ traceId: TRACE_ID, continued: true });
    expect([...sent.keys()]).toEqual(['b3']);
  });

  it('reads B3 multi headers, an unsampled decision and a 64-bit trace id', () => {
    const { context, sent } = injected(
      { 'x-b3-traceid': PARENT_ID, 'x-b3-spanid': PARENT_ID, 'x-b3-sampled': '0' },
      'b3multi',
    );
    expect(context).toMatchObject({ traceId: `${'0'.repeat(16)}${PARENT_ID}`, flags: 0, continued: true });
    expect(sent.get('x-b3-sampled')).toEqual(['0']);
  });

  it('does not read a format it is not configured for: a W3C caller starts a new trace under b3 alone', () => {
    const { context, sent } = injected({ traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` }, 'b3');
    expect(context.continued).toBe(false);
    expect(sent.has('traceparent')).toBe(false);
    expect(sent.get('b3')).toEqual([`${context.traceId}-${context.spanId}-1`]);
  });

  it('hands nothing on with none', () => {
    const { sent } = injected(
      { b3: `${TRACE_ID}-${PARENT_ID}-1`, traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` },
      'none',
    );
    expect(sent.size).toBe(0);
  });
});

describe('random ids', () => {
  it('are lower-case hex of the right length, not zero, and distinct across refills of the pool', () => {
    const traceIds = new Set<string>();
    const spanIds = new Set<string>();
    for (let i = 0; i < 2_000; i++) {
      const traceId = newTraceId();
      const spanId = newSpanId();
      expect(traceId).toMatch(/^[\da-f]{32}$/);
      expect(spanId).toMatch(/^[\da-f]{16}$/);
      traceIds.add(traceId);
      spanIds.add(spanId);
    }
    expect(traceIds.size).toBe(2_000);
    expect(spanIds.size).toBe(2_000);
  });
});
