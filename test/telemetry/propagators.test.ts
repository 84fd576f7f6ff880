// OTEL_PROPAGATORS=b3 with no exporter (the SDK not started): the gateway reads a B3 caller's trace
// with OpenTelemetry's B3 propagator and hands the participant the same trace id in B3, for a call
// and for a WebSocket upgrade; formats it is not configured for pass as sent. The request log line
// carries the ids as trace_id and span_id.
import http from 'node:http';
import net from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTracing, type Tracing } from '../../src/telemetry/tracing.js';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { logCapture } from '../helpers/log-capture.js';
import { headerValues, startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { scriptedParticipant } from './canton-answers.js';

const CLIENT_TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN_ID = '00f067aa0ba902b7';
const OTHER_TRACEPARENT = `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`;
const B3 = /^([\da-f]{32})-([\da-f]{16})-([01d])$/;

let tracing: Tracing;
let upstream: RecordingUpstream | undefined;
let participant: http.Server | undefined;
let gw: RunningGateway | undefined;

beforeAll(() => {
  for (const name of [
    'OTEL_SDK_DISABLED',
    'OTEL_TRACES_EXPORTER',
    'OTEL_EXPORTER_OTLP_ENDPOINT',
    'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  ])
    delete process.env[name];
  process.env.OTEL_PROPAGATORS = 'b3';
  tracing = startTracing()!;
});

afterAll(async () => {
  await tracing?.shutdown();
});

afterEach(async () => {
  await gw?.close();
  await upstream?.close();
  participant?.closeAllConnections();
  if (participant !== undefined) await new Promise((resolve) => participant!.close(resolve));
  gw = upstream = participant = undefined;
});

describe('OTEL_PROPAGATORS=b3 without an exporter', () => {
  it('propagates without spans, with the B3 propagator alone', () => {
    expect(tracing.exporting).toBe(false);
    expect(tracing.propagators).toEqual({ names: ['b3'], unknown: [] });
  });

  it("continues a B3 caller's trace: the participant gets one b3 header, its trace id, the gateway's hop", async () => {
    upstream = await startRecordingUpstream(scriptedParticipant);
    const log = logCapture();
    gw = await startGateway(upstream.url, {}, { tracingActive: true, logger: log.logger });
    const response = await fetch(`${gw.url}/v2/version`, {
      headers: gw.auth({ b3: `${CLIENT_TRACE_ID}-${CLIENT_SPAN_ID}-1`, traceparent: OTHER_TRACEPARENT }),
    });
    expect(response.status).toBe(200);
    await response.arrayBuffer();
    const received = upstream.requests[0]!;
    const sent = headerValues(received, 'b3');
    expect(sent).toHaveLength(1);
    const [, traceId, spanId, sampled] = B3.exec(sent[0]!)!;
    expect([traceId, sampled]).toEqual([CLIENT_TRACE_ID, '1']);
    expect(spanId).not.toBe(CLIENT_SPAN_ID);
    // A format the gateway is not configured for is not its to replace.
    expect(headerValues(received, 'traceparent')).toEqual([OTHER_TRACEPARENT]);
    expect(response.headers.get('traceresponse')).toBe(`00-${CLIENT_TRACE_ID}-${spanId}-01`);
    const line = await log.requestLine(response.headers.get('x-request-id'));
    expect(line).toMatchObject({ trace_id: CLIENT_TRACE_ID, span_id: spanId, traceId: CLIENT_TRACE_ID, spanId });
  });

  it('reads B3 multi headers too (the B3 propagator reads both encodings), sends its configured one', async () => {
    upstream = await startRecordingUpstream(scriptedParticipant);
    gw = await startGateway(upstream.url, { versionCache: { ttlSeconds: 0 } }, { tracingActive: true });
    const response = await fetch(`${gw.url}/v2/version`, {
      headers: gw.auth({ 'x-b3-traceid': CLIENT_TRACE_ID, 'x-b3-spanid': CLIENT_SPAN_ID, 'x-b3-sampled': '0' }),
    });
    await response.arrayBuffer();
    const [, traceId, , sampled] = B3.exec(headerValues(upstream.requests[0]!, 'b3')[0]!)!;
    expect([traceId, sampled]).toEqual([CLIENT_TRACE_ID, '0']);
    // The caller's B3 headers were read, so they are replaced, not passed on beside the gateway's.
    expect(headerValues(upstream.requests[0]!, 'x-b3-traceid')).toEqual([]);
  });

  it("continues a B3 caller's trace into a WebSocket upgrade", async () => {
    const upgrades: http.IncomingMessage[] = [];
    participant = http.createServer((_request, response) => response.end('{}'));
    participant.on('upgrade', (request: http.IncomingMessage, socket: net.Socket) => {
      upgrades.push(request);
      socket.end('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
    });
    await new Promise<void>((resolve) => participant!.listen(0, '127.0.0.1', resolve));
    gw = await startGateway(`http://127.0.0.1:${(participant.address() as net.AddressInfo).port}`);
    const { port } = new URL(gw.url);
    await new Promise<void>((resolve, reject) => {
      const socket = net.connect(Number(port), '127.0.0.1', () =>
        socket.write(
          [
            'GET /v2/updates HTTP/1.1',
            'Host: gw',
            'Connection: Upgrade',
            'Upgrade: websocket',
            'Sec-WebSocket-Version: 13',
            'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
            `Authorization: ${gw!.auth().authorization!}`,
            `b3: ${CLIENT_TRACE_ID}-${CLIENT_SPAN_ID}-1`,
            '',
            '',
          ].join('\r\n'),
        ),
      );
      socket.once('data', () => {
        socket.destroy();
        resolve();
      });
      socket.on('error', reject);
    });
    expect(upgrades).toHaveLength(1);
    const [, traceId, spanId] = B3.exec(String(upgrades[0]!.headers.b3))!;
    expect(traceId).toBe(CLIENT_TRACE_ID);
    expect(spanId).not.toBe(CLIENT_SPAN_ID);
  });
});
