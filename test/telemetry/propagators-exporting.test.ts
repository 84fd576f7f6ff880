// OTEL_PROPAGATORS=b3multi,tracecontext with spans exported: the SDK runs with the same
// propagators as the spanless path, so a B3 caller's trace id reaches the participant in both
// formats, from the gateway's client span, and the client's own B3 headers are not passed beside them.
import { afterEach, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { headerValues, startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { scriptedParticipant } from './canton-answers.js';
import { SpanKind, tracesExportedForFile } from './otlp-receiver.js';

const CLIENT_TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN_ID = '00f067aa0ba902b7';

let upstream: RecordingUpstream | undefined;
let gw: RunningGateway | undefined;

const traces = tracesExportedForFile(() => {
  process.env.OTEL_PROPAGATORS = 'b3multi,tracecontext';
});

afterEach(async () => {
  await gw?.close();
  await upstream?.close();
  gw = upstream = undefined;
});

describe('OTEL_PROPAGATORS=b3multi,tracecontext with an exporter', () => {
  it("hands a B3 caller's trace id on in both formats, once each, from the gateway's client span", async () => {
    expect(traces.tracing).toMatchObject({ exporting: true, propagators: { names: ['b3multi', 'tracecontext'] } });
    upstream = await startRecordingUpstream(scriptedParticipant);
    gw = await startGateway(upstream.url, {}, { tracingActive: true });
    const response = await fetch(`${gw.url}/v2/version`, {
      headers: gw.auth({ 'x-b3-traceid': CLIENT_TRACE_ID, 'x-b3-spanid': CLIENT_SPAN_ID, 'x-b3-sampled': '1' }),
    });
    expect(response.status).toBe(200);
    await response.arrayBuffer();
    const received = upstream.requests[0]!;
    expect(headerValues(received, 'x-b3-traceid')).toEqual([CLIENT_TRACE_ID]);
    const spanIds = headerValues(received, 'x-b3-spanid');
    expect(spanIds).toHaveLength(1);
    expect(spanIds[0]).not.toBe(CLIENT_SPAN_ID);
    expect(headerValues(received, 'traceparent')).toEqual([`00-${CLIENT_TRACE_ID}-${spanIds[0]}-01`]);
    expect(response.headers.get('traceresponse')).toMatch(new RegExp(`^00-${CLIENT_TRACE_ID}-[\\da-f]{16}-01$`));

    // The span the participant was told of is the gateway's client span, in the caller's trace.
    const deadline = Date.now() + 5_000;
    while (!traces.receiver.spans.some((span) => span.spanId === spanIds[0]) && Date.now() < deadline) {
      await traces.tracing.forceFlush();
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const client = traces.receiver.spans.find((span) => span.spanId === spanIds[0]);
    expect(client).toMatchObject({ traceId: CLIENT_TRACE_ID, kind: SpanKind.client });
    const server = traces.receiver.spans.find(
      (span) => span.kind === SpanKind.server && span.traceId === CLIENT_TRACE_ID,
    );
    expect(server).toMatchObject({ parentSpanId: CLIENT_SPAN_ID });
  });
});
