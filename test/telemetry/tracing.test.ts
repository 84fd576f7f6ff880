// The OpenTelemetry SDK runs in this test's process (one per test file: vitest forks), exporting
// OTLP/HTTP JSON to a receiver on 127.0.0.1. The gateway continues the client's trace, gives the
// participant exactly one traceparent (its client span's), returns the trace in `traceresponse`,
// puts the trace id in its own errors and in the request's log line, and never exports a token.
import { createConnection } from 'node:net';
import { describe, expect, it } from 'vitest';
import { SpanAttributes } from '../../src/telemetry/request-telemetry.js';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { logCapture } from '../helpers/log-capture.js';
import { headerValues, startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { OPERATION_CASES, SCENARIO_HEADER, scriptedParticipant } from './canton-answers.js';
import { SpanKind, tracesExportedForFile, type ReceivedSpan } from './otlp-receiver.js';
import { closeAfterEach } from '../helpers/per-test.js';

const CLIENT_TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_PARENT_ID = '00f067aa0ba902b7';
const CLIENT_TRACEPARENT = `00-${CLIENT_TRACE_ID}-${CLIENT_PARENT_ID}-01`;
const TRACEPARENT = /^00-([\da-f]{32})-([\da-f]{16})-([\da-f]{2})$/;
/** Shaped like a JWT so that every scrubber would recognise it; its signature is garbage. */
const BAD_TOKEN = 'eyJhbGciOiJSUzI1NiIsImtpZCI6Im5vbmUifQ.eyJzdWIiOiJtYWxsb3J5In0.c2VjcmV0LXNpZ25hdHVyZS12YWx1ZQ';

const updateByOffset = OPERATION_CASES.find((c) => c.operation === 'getUpdateByOffset')!;

let upstream: RecordingUpstream;
let gw: RunningGateway;

const traces = tracesExportedForFile();

closeAfterEach(
  () => gw,
  () => upstream,
);

async function exportedSpans(predicate: (span: ReceivedSpan) => boolean, count = 1): Promise<ReceivedSpan[]> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    await traces.tracing.forceFlush();
    const found = traces.receiver.spans.filter(predicate);
    if (found.length >= count || Date.now() > deadline) return found;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function postUpdateByOffset(headers: Record<string, string>): Promise<Response> {
  return fetch(`${gw.url}${updateByOffset.path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: updateByOffset.body!,
  });
}

describe('tracing', () => {
  it("continues the client's trace; the participant receives one traceparent, its parent the gateway's client span", async () => {
    upstream = await startRecordingUpstream(scriptedParticipant);
    gw = await startGateway(upstream.url, {}, { tracingActive: true });
    const response = await postUpdateByOffset(
      gw.auth({ traceparent: CLIENT_TRACEPARENT, tracestate: 'vendor=opaque', baggage: 'tenant=acme' }),
    );
    expect(response.status).toBe(200);
    await response.arrayBuffer();

    // What the participant received: exactly one of each trace header, the gateway's.
    expect(upstream.requests).toHaveLength(1);
    const received = upstream.requests[0]!;
    expect(headerValues(received, 'traceparent')).toHaveLength(1);
    expect(headerValues(received, 'tracestate')).toEqual(['vendor=opaque']);
    expect(headerValues(received, 'baggage')).toEqual(['tenant=acme']);
    const [, upstreamTraceId, upstreamParentId, flags] = TRACEPARENT.exec(headerValues(received, 'traceparent')[0]!)!;
    expect(upstreamTraceId).toBe(CLIENT_TRACE_ID);
    expect(upstreamParentId).not.toBe(CLIENT_PARENT_ID);
    expect(flags).toBe('01');

    // What the client got back: the trace and the gateway's server span.
    const [, responseTraceId, serverSpanId] = TRACEPARENT.exec(response.headers.get('traceresponse') ?? '')!;
    expect(responseTraceId).toBe(CLIENT_TRACE_ID);

    // What the collector received.
    const [server] = await exportedSpans((s) => s.kind === SpanKind.server && s.spanId === serverSpanId);
    const [client] = await exportedSpans((s) => s.kind === SpanKind.client && s.spanId === upstreamParentId);
    expect(server).toMatchObject({
      traceId: CLIENT_TRACE_ID,
      parentSpanId: CLIENT_PARENT_ID,
      name: 'POST /v2/updates/update-by-offset',
      serviceName: 'ledger-gateway',
    });
    expect(server!.attributes).toMatchObject({
      [SpanAttributes.operation]: 'getUpdateByOffset',
      [SpanAttributes.errorCode]: 'none',
      [SpanAttributes.status]: 200,
      [SpanAttributes.route]: '/v2/updates/update-by-offset',
    });
    expect(client).toMatchObject({ traceId: CLIENT_TRACE_ID, parentSpanId: serverSpanId });
    expect(client!.attributes).toMatchObject({ 'http.response.status_code': 200 });

    // No token and no body in any exported span.
    const exported = traces.receiver.bodies.join('\n');
    expect(exported).not.toContain(gw.auth().authorization!.slice('Bearer '.length));
    expect(exported).not.toContain('Bearer');
    expect(exported).not.toContain('TRANSACTION_SHAPE_ACS_DELTA');
  });

  it('names the canonical path under server.pathPrefix: the server span, its url.path, the client span', async () => {
    upstream = await startRecordingUpstream(scriptedParticipant);
    gw = await startGateway(
      `${upstream.url}/ledger`,
      { server: { pathPrefix: '/api/json-api' } },
      { tracingActive: true },
    );
    const response = await fetch(`${gw.url}/api/json-api${updateByOffset.path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...gw.auth({ traceparent: CLIENT_TRACEPARENT }) },
      body: updateByOffset.body!,
    });
    expect(response.status).toBe(200);
    await response.arrayBuffer();
    expect(upstream.requests.map((r) => r.url)).toEqual([`/ledger${updateByOffset.path}`]);
    const [, , serverSpanId] = TRACEPARENT.exec(response.headers.get('traceresponse') ?? '')!;
    const [server] = await exportedSpans((s) => s.kind === SpanKind.server && s.spanId === serverSpanId);
    expect(server).toMatchObject({ name: 'POST /v2/updates/update-by-offset' });
    expect(server!.attributes).toMatchObject({
      'url.path': updateByOffset.path,
      [SpanAttributes.operation]: 'getUpdateByOffset',
      [SpanAttributes.route]: '/v2/updates/update-by-offset',
    });
    const [client] = await exportedSpans((s) => s.kind === SpanKind.client && s.parentSpanId === serverSpanId);
    expect(String(client!.attributes['url.full'])).toMatch(/\/ledger\/v2\/updates\/update-by-offset$/);
    expect(traces.receiver.bodies.join('\n')).not.toContain('/api/json-api');
  });

  it("starts a trace without a traceparent; the gateway's error carries its trace id", async () => {
    upstream = await startRecordingUpstream(scriptedParticipant);
    gw = await startGateway(upstream.url, {}, { tracingActive: true });
    const response = await postUpdateByOffset({ authorization: `Bearer ${BAD_TOKEN}` });
    expect(response.status).toBe(401);
    const body = (await response.json()) as { code: string; traceId: string | null; correlationId: string };
    const [, traceId, serverSpanId] = TRACEPARENT.exec(response.headers.get('traceresponse') ?? '')!;
    expect(body).toMatchObject({ code: 'NA', traceId, correlationId: response.headers.get('x-request-id') });
    expect(upstream.requests).toHaveLength(0);

    const [server] = await exportedSpans((s) => s.spanId === serverSpanId);
    expect(server).toMatchObject({ traceId, parentSpanId: '', kind: SpanKind.server });
    expect(server!.attributes).toMatchObject({
      [SpanAttributes.errorCode]: 'UNAUTHENTICATED',
      [SpanAttributes.status]: 401,
      [SpanAttributes.operation]: 'getUpdateByOffset',
    });
    expect(traces.receiver.bodies.join('\n')).not.toContain(BAD_TOKEN.split('.')[2]);
  });

  it('exports no query values: a token in the query never reaches a span (server or client), the call is forwarded as sent', async () => {
    upstream = await startRecordingUpstream(scriptedParticipant);
    gw = await startGateway(upstream.url, {}, { tracingActive: true });
    const query = `access_token=${BAD_TOKEN}&pageSize=5&${BAD_TOKEN}&SECRETBARE0123456789`;
    const served = await fetch(`${gw.url}/v2/users?${query}`, {
      headers: gw.auth({ traceparent: CLIENT_TRACEPARENT }),
    });
    expect(served.status).toBe(200);
    await served.arrayBuffer();
    expect(upstream.requests[0]!.url).toBe(`/v2/users?${query}`); // forwarded unchanged
    const refused = await fetch(`${gw.url}/v2/users?${query}`);
    expect(refused.status).toBe(401);
    await refused.arrayBuffer();

    const [, , serverSpanId] = TRACEPARENT.exec(served.headers.get('traceresponse') ?? '')!;
    const [server] = await exportedSpans((s) => s.spanId === serverSpanId);
    const [client] = await exportedSpans((s) => s.kind === SpanKind.client && s.parentSpanId === serverSpanId);
    const redacted = 'access_token=REDACTED&pageSize=REDACTED&REDACTED&REDACTED';
    expect(server!.attributes).toMatchObject({ 'url.path': '/v2/users', 'url.query': redacted });
    expect(client!.attributes).toMatchObject({
      'url.path': '/v2/users',
      'url.query': redacted,
      'url.full': `${upstream.url}/v2/users?${redacted}`,
    });
    await exportedSpans((s) => s.kind === SpanKind.server && s.attributes[SpanAttributes.status] === 401);
    // A fragment is refused (400), after its span has begun: the span has the path alone.
    // (fetch drops a fragment itself: sent raw.)
    const raw = await new Promise<string>((resolve) => {
      const socket = createConnection(Number(new URL(gw.url).port), '127.0.0.1', () =>
        socket.end(
          `GET /v2/users#access_token=SECRETFRAGMENT0123 HTTP/1.1\r\nHost: gw\r\nAuthorization: ${gw.auth().authorization}\r\nConnection: close\r\n\r\n`,
        ),
      );
      let text = '';
      socket.on('data', (chunk: Buffer) => {
        text += chunk.toString();
      });
      socket.on('close', () => resolve(text));
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400/);
    await exportedSpans((s) => s.kind === SpanKind.server && s.attributes[SpanAttributes.status] === 400);
    const exported = traces.receiver.bodies.join('\n');
    for (const part of [...BAD_TOKEN.split('.'), 'SECRETBARE0123456789', 'SECRETFRAGMENT0123'])
      expect(exported).not.toContain(part);
  });

  it("puts the participant's error code on the server span, read from the answer as it streams through", async () => {
    upstream = await startRecordingUpstream(scriptedParticipant);
    gw = await startGateway(upstream.url, {}, { tracingActive: true });
    const response = await postUpdateByOffset(gw.auth({ [SCENARIO_HEADER]: 'error' }));
    expect(response.status).toBe(404);
    expect(await response.text()).toBe(updateByOffset.upstreamError.body);
    const [, , serverSpanId] = TRACEPARENT.exec(response.headers.get('traceresponse') ?? '')!;
    const [server] = await exportedSpans((s) => s.spanId === serverSpanId);
    expect(server!.attributes).toMatchObject({
      [SpanAttributes.errorCode]: 'UPDATE_NOT_FOUND',
      [SpanAttributes.status]: 404,
    });
  });

  it("writes the refused request's log line with its correlation id, trace id and span id, and no token", async () => {
    upstream = await startRecordingUpstream(scriptedParticipant);
    const log = logCapture();
    gw = await startGateway(upstream.url, {}, { tracingActive: true, logger: log.logger });
    const response = await postUpdateByOffset({
      authorization: `Bearer ${BAD_TOKEN}`,
      traceparent: CLIENT_TRACEPARENT,
      cookie: 'session=cookie-secret',
    });
    expect(response.status).toBe(401);
    await response.arrayBuffer();
    const [, , serverSpanId] = TRACEPARENT.exec(response.headers.get('traceresponse') ?? '')!;
    await log.requestLine(response.headers.get('x-request-id'));

    const entries = log.entries();
    const requestLines = entries.filter((entry) => entry.msg === 'request');
    expect(requestLines).toHaveLength(1);
    expect(requestLines[0]).toMatchObject({
      level: 'info',
      reqId: response.headers.get('x-request-id'),
      traceId: CLIENT_TRACE_ID,
      spanId: serverSpanId,
      operation: 'getUpdateByOffset',
      method: 'POST',
      status: 401,
      errorCode: 'UNAUTHENTICATED',
      reason: expect.any(String), // why authentication refused it: on the same line, never a label
    });
    expect(entries.filter((entry) => entry.reqId === response.headers.get('x-request-id'))).toHaveLength(1);
    expect(typeof requestLines[0]!.durationMs).toBe('number');
    const everything = log.lines.join('\n');
    expect(everything).not.toContain(BAD_TOKEN.split('.')[2]);
    expect(everything).not.toContain(BAD_TOKEN.split('.')[1]);
    expect(everything).not.toContain('cookie-secret');
  });

  it('attaches the trace id of a sampled request as an OpenMetrics exemplar when configured', async () => {
    upstream = await startRecordingUpstream(scriptedParticipant);
    gw = await startGateway(upstream.url, { telemetry: { metrics: { exemplars: true } } }, { tracingActive: true });
    const response = await postUpdateByOffset(gw.auth({ traceparent: CLIENT_TRACEPARENT }));
    expect(response.status).toBe(200);
    await response.arrayBuffer();
    await new Promise((resolve) => setImmediate(resolve));
    const metrics = await fetch(`${gw.adminUrl}/metrics`);
    expect(metrics.headers.get('content-type')).toContain('application/openmetrics-text');
    const text = await metrics.text();
    expect(text).toMatch(
      new RegExp(
        `^ledger_gateway_request_duration_seconds_bucket\\{[^}]*operation="getUpdateByOffset"[^}]*\\} 1 # \\{trace_id="${CLIENT_TRACE_ID}"\\}`,
        'm',
      ),
    );
    expect(text).toMatch(
      new RegExp(
        `^ledger_gateway_upstream_request_duration_seconds_bucket\\{[^}]*operation="getUpdateByOffset"[^}]*\\} 1 # \\{trace_id="${CLIENT_TRACE_ID}"\\}`,
        'm',
      ),
    );
    // The counter keeps its name in the OpenMetrics format.
    expect(text).toMatch(
      /^ledger_gateway_requests_total\{operation="getUpdateByOffset",method="POST",status="200",error_code="none"\} 1$/m,
    );
    expect(text.trimEnd().endsWith('# EOF')).toBe(true);
  });
});
