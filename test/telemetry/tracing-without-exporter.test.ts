// Tracing as the process starts it with no exporter configured (no OTEL_TRACES_EXPORTER, no
// OTEL_EXPORTER_OTLP_ENDPOINT): nothing is exported and the SDK does not run, yet the client's
// trace is continued by hand, the participant gets one traceparent with the gateway's span id
// (tracestate and baggage as sent), the client gets it back in traceresponse, and a request
// without one still gets a trace id for its errors and its log line. And OTEL_SDK_DISABLED=true
// starts nothing.
import { trace } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { environmentExportsTraces, startTracing, type Tracing } from '../../src/telemetry/tracing.js';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { logCapture } from '../helpers/log-capture.js';
import {
  headerValues,
  startRecordingUpstream,
  type RecordedRequest,
  type RecordingUpstream,
} from '../helpers/recording-upstream.js';
import { scriptedParticipant } from './canton-answers.js';
import { closeAfterEach } from '../helpers/per-test.js';

const TRACEPARENT = /^00-([\da-f]{32})-([\da-f]{16})-([\da-f]{2})$/;
const CLIENT_TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_PARENT_ID = '00f067aa0ba902b7';

let tracing: Tracing;
let upstream: RecordingUpstream;
let gw: RunningGateway;

const traceEnvironment = [
  'OTEL_SDK_DISABLED',
  'OTEL_TRACES_EXPORTER',
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
];

beforeAll(() => {
  for (const name of traceEnvironment) delete process.env[name];
  process.env.OTEL_SDK_DISABLED = 'true';
  expect(startTracing()).toBeUndefined();
  delete process.env.OTEL_SDK_DISABLED;
  tracing = startTracing()!;
});

afterAll(async () => {
  await tracing?.shutdown();
});

closeAfterEach(
  () => gw,
  () => upstream,
);

const traceparents = (request: RecordedRequest) => headerValues(request, 'traceparent');

describe('tracing without an exporter', () => {
  it('exports only when the environment names an exporter; without one the SDK is not started', () => {
    expect(tracing.exporting).toBe(false);
    expect(tracing.fastifyPlugin).toBeUndefined();
    expect(trace.getTracer('probe').startSpan('probe').spanContext().traceId).toBe('0'.repeat(32)); // the API's no-op tracer
    expect(environmentExportsTraces({})).toBe(false);
    expect(
      environmentExportsTraces({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }),
    ).toBe(false);
    expect(environmentExportsTraces({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true);
    expect(environmentExportsTraces({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toBe(
      true,
    );
    expect(environmentExportsTraces({ OTEL_TRACES_EXPORTER: 'otlp' })).toBe(true);
    expect(environmentExportsTraces({ OTEL_TRACES_EXPORTER: 'console' })).toBe(true);
  });

  it("still continues the client's trace and gives the participant the gateway's own span id, once", async () => {
    upstream = await startRecordingUpstream(scriptedParticipant);
    const log = logCapture();
    gw = await startGateway(upstream.url, {}, { tracingActive: true, logger: log.logger });
    const response = await fetch(`${gw.url}/v2/version`, {
      headers: gw.auth({
        traceparent: `00-${CLIENT_TRACE_ID}-${CLIENT_PARENT_ID}-01`,
        tracestate: 'vendor=opaque',
        baggage: 'tenant=acme',
      }),
    });
    expect(response.status).toBe(200);
    await response.arrayBuffer();
    const received = upstream.requests[0]!;
    const sent = traceparents(received);
    expect(sent).toHaveLength(1);
    const [, traceId, parentId, flags] = TRACEPARENT.exec(sent[0]!)!;
    expect(traceId).toBe(CLIENT_TRACE_ID);
    expect(parentId).not.toBe(CLIENT_PARENT_ID);
    expect(flags).toBe('01');
    expect(headerValues(received, 'tracestate')).toEqual(['vendor=opaque']);
    expect(headerValues(received, 'baggage')).toEqual(['tenant=acme']);
    // The client is told the gateway's hop: the same traceparent the participant received.
    expect(response.headers.get('traceresponse')).toBe(sent[0]);
    const line = await log.requestLine(response.headers.get('x-request-id'));
    expect(line).toMatchObject({ traceId: CLIENT_TRACE_ID, spanId: parentId });
  });

  it("keeps an unsampled caller's flags, and replaces an invalid traceparent with a new trace", async () => {
    upstream = await startRecordingUpstream(scriptedParticipant);
    gw = await startGateway(upstream.url, { versionCache: { ttlSeconds: 0 } }, { tracingActive: true }); // every call reaches the participant
    const unsampled = await fetch(`${gw.url}/v2/version`, {
      headers: gw.auth({ traceparent: `00-${CLIENT_TRACE_ID}-${CLIENT_PARENT_ID}-00` }),
    });
    await unsampled.arrayBuffer();
    const [, traceId, parentId, flags] = TRACEPARENT.exec(traceparents(upstream.requests[0]!)[0]!)!;
    expect([traceId, flags]).toEqual([CLIENT_TRACE_ID, '00']);
    expect(parentId).not.toBe(CLIENT_PARENT_ID);

    const invalid = `00-${'0'.repeat(32)}-${CLIENT_PARENT_ID}-01`;
    const replaced = await fetch(`${gw.url}/v2/version`, {
      headers: gw.auth({ traceparent: invalid, tracestate: 'vendor=opaque' }),
    });
    await replaced.arrayBuffer();
    const sent = traceparents(upstream.requests[1]!);
    expect(sent).toHaveLength(1);
    expect(sent[0]).not.toBe(invalid);
    expect(sent[0]).toMatch(TRACEPARENT);
    expect(replaced.headers.get('traceresponse')).toBe(sent[0]);
    // The new trace takes no tracestate: the caller's belongs to a trace the participant never sees.
    expect(headerValues(upstream.requests[1]!, 'tracestate')).toEqual([]);
  });

  it("starts a trace for a request without one: the participant and the gateway's errors share its id", async () => {
    upstream = await startRecordingUpstream(scriptedParticipant);
    gw = await startGateway(upstream.url, {}, { tracingActive: true });
    const forwarded = await fetch(`${gw.url}/v2/version`, { headers: gw.auth() });
    await forwarded.arrayBuffer();
    const sent = traceparents(upstream.requests[0]!);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatch(TRACEPARENT);
    expect(forwarded.headers.get('traceresponse')).toMatch(TRACEPARENT);
    expect(TRACEPARENT.exec(sent[0]!)?.[1]).toBe(TRACEPARENT.exec(forwarded.headers.get('traceresponse') ?? '')?.[1]);

    const refused = await fetch(`${gw.url}/v2/version`);
    expect(refused.status).toBe(401);
    const body = (await refused.json()) as { traceId: string | null };
    expect(body.traceId).toMatch(/^[\da-f]{32}$/);
    expect(body.traceId).toBe(TRACEPARENT.exec(refused.headers.get('traceresponse') ?? '')?.[1]);
  });
});
