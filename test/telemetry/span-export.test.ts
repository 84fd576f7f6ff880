// OTEL_TRACES_EXPORTER and OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL choose the exporter as the NodeSDK
// did: OTLP/HTTP in protobuf by default (the manifests' setting), JSON on request; what the gateway
// does not ship (gRPC, Zipkin) is named, and nothing is exported for it.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { spanExportFromEnvironment } from '../../src/telemetry/span-export.js';

async function startReceiver() {
  const received: Array<{ path: string | undefined; contentType: string | undefined }> = [];
  const server = createServer((request, response) => {
    request.resume().on('end', () => {
      received.push({ path: request.url, contentType: request.headers['content-type'] });
      response.writeHead(200, { 'content-type': request.headers['content-type'] ?? 'application/json' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('the span exporter the environment names', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it.each([
    [{}, 'application/x-protobuf'],
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' }, 'application/x-protobuf'],
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }, 'application/json'],
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' }, 'application/json'],
  ])('%j: spans reach /v1/traces as %s', async (variables, contentType) => {
    const receiver = await startReceiver();
    try {
      vi.stubEnv('OTEL_TRACES_EXPORTER', '');
      vi.stubEnv('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', '');
      vi.stubEnv('OTEL_EXPORTER_OTLP_ENDPOINT', receiver.url);
      for (const [name, value] of Object.entries(variables)) vi.stubEnv(name, value);
      const { processors, unsupported } = spanExportFromEnvironment(process.env);
      expect(unsupported).toEqual([]);
      const provider = new BasicTracerProvider({ spanProcessors: processors });
      provider.getTracer('span-export-test').startSpan('one').end();
      await provider.forceFlush();
      await provider.shutdown();
      expect(receiver.received).toEqual([{ path: '/v1/traces', contentType }]);
    } finally {
      await receiver.close();
    }
  });

  it('names the exporters and protocols it does not ship, and exports nothing for them', () => {
    expect(spanExportFromEnvironment({ OTEL_TRACES_EXPORTER: 'zipkin' })).toEqual({
      processors: [],
      unsupported: ['zipkin'],
    });
    expect(spanExportFromEnvironment({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toEqual({
      processors: [],
      unsupported: ['otlp grpc'],
    });
    // As the SDK: `none` beside another name counts for nothing, and unset means otlp.
    expect(spanExportFromEnvironment({ OTEL_TRACES_EXPORTER: 'none,jaeger' }).unsupported).toEqual([]);
    expect(spanExportFromEnvironment({ OTEL_TRACES_EXPORTER: 'jaeger,console' }).processors).toHaveLength(1);
  });
});
