// W3C Trace Context by hand (no exporter configured): which traceparents are continued, what the
// gateway's hop looks like, and that its ids are random and never all zero.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { continueTrace, formatTraceparent, isSampled, newSpanId, newTraceId, parseTraceparent } from '../src/trace-context.js';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT_ID = '00f067aa0ba902b7';
const TRACEPARENT = /^00-([\da-f]{32})-([\da-f]{16})-([\da-f]{2})$/;

describe('parseTraceparent', () => {
  it('reads a valid version 00 traceparent', () => {
    expect(parseTraceparent(`00-${TRACE_ID}-${PARENT_ID}-01`)).toEqual({ traceId: TRACE_ID, parentId: PARENT_ID, flags: '01' });
    expect(parseTraceparent(`00-${TRACE_ID}-${PARENT_ID}-00`)?.flags).toBe('00');
  });

  it('refuses what W3C Trace Context calls invalid (then a new trace starts)', () => {
    for (const header of [
      undefined,
      '',
      [`00-${TRACE_ID}-${PARENT_ID}-01`, `00-${TRACE_ID}-${PARENT_ID}-01`], // repeated
      `00-${TRACE_ID}-${PARENT_ID}-01, 00-${TRACE_ID}-${PARENT_ID}-01`, // repeated, joined
      `00-${'0'.repeat(32)}-${PARENT_ID}-01`, // all-zero trace id
      `00-${TRACE_ID}-${'0'.repeat(16)}-01`, // all-zero parent id
      `00-${TRACE_ID.toUpperCase()}-${PARENT_ID}-01`, // upper-case hex
      `01-${TRACE_ID}-${PARENT_ID}-01`, // another version
      `ff-${TRACE_ID}-${PARENT_ID}-01`,
      `00-${TRACE_ID}-${PARENT_ID}-01-extra`,
      `00-${TRACE_ID.slice(1)}-${PARENT_ID}-01`,
      `00-${TRACE_ID}-${PARENT_ID}-1`,
      ` 00-${TRACE_ID}-${PARENT_ID}-01`,
      `00_${TRACE_ID}_${PARENT_ID}_01`,
    ]) {
      expect(parseTraceparent(header), String(header)).toBeUndefined();
    }
  });

  it('never throws, and accepts a header exactly when it has the version 00 shape with non-zero ids', () => {
    // Valid headers with one character replaced, inserted or removed: most are invalid, many stay
    // valid (a hex digit for a hex digit), so both answers are exercised, checked against the spec's
    // grammar written out independently of the parser.
    const hex = (length: number) => fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: length, maxLength: length });
    const valid = fc.tuple(hex(32), hex(16), hex(2)).map(([traceId, parentId, flags]) => `00-${traceId}-${parentId}-${flags}`);
    const edit = fc.tuple(valid, fc.nat(56), fc.constantFrom('replace', 'insert', 'remove', 'none'), fc.constantFrom(...'0af-gA 0_'))
      .map(([header, at, kind, char]) => kind === 'none' ? header
        : kind === 'remove' ? header.slice(0, at) + header.slice(at + 1)
          : header.slice(0, at) + char + header.slice(kind === 'replace' ? at + 1 : at));
    const spec = (header: string) => /^00-[\da-f]{32}-[\da-f]{16}-[\da-f]{2}$/.test(header)
      && header.slice(3, 35) !== '0'.repeat(32) && header.slice(36, 52) !== '0'.repeat(16);
    let accepted = 0;
    let refused = 0;
    fc.assert(fc.property(fc.oneof(edit, fc.string({ maxLength: 80 })), (header) => {
      const parsed = parseTraceparent(header);
      expect(parsed !== undefined, header).toBe(spec(header));
      if (parsed === undefined) refused++;
      else {
        accepted++;
        expect(`00-${parsed.traceId}-${parsed.parentId}-${parsed.flags}`).toBe(header);
      }
    }), { numRuns: 2_000 });
    expect(accepted).toBeGreaterThan(100);
    expect(refused).toBeGreaterThan(100);
  });
});

describe('continueTrace', () => {
  it('continues the caller\'s trace with a new span id of the gateway\'s, keeping the flags', () => {
    const context = continueTrace(`00-${TRACE_ID}-${PARENT_ID}-00`);
    expect(context.traceId).toBe(TRACE_ID);
    expect(context.spanId).toMatch(/^[\da-f]{16}$/);
    expect(context.spanId).not.toBe(PARENT_ID);
    expect(context.flags).toBe('00');
    expect(isSampled(context)).toBe(false);
  });

  it('starts a new sampled trace when the caller sent none, or an invalid one', () => {
    for (const header of [undefined, 'garbage', `00-${'0'.repeat(32)}-${PARENT_ID}-01`]) {
      const context = continueTrace(header);
      expect(context.traceId).toMatch(/^[\da-f]{32}$/);
      expect(context.traceId).not.toBe('0'.repeat(32));
      expect(context.flags).toBe('01');
      expect(isSampled(context)).toBe(true);
    }
  });

  it('formats the gateway\'s hop as a valid traceparent (sent upstream, returned as traceresponse)', () => {
    const context = continueTrace(`00-${TRACE_ID}-${PARENT_ID}-01`);
    const header = formatTraceparent(context);
    expect(header).toMatch(TRACEPARENT);
    expect(header).toBe(`00-${TRACE_ID}-${context.spanId}-01`);
    expect(parseTraceparent(header)).toEqual({ traceId: TRACE_ID, parentId: context.spanId, flags: '01' });
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
