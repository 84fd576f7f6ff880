// An OTLP/HTTP trace receiver on 127.0.0.1 port 0: accepts POST /v1/traces in the JSON encoding
// (what @opentelemetry/exporter-trace-otlp-http sends) and keeps every span.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll } from 'vitest';
import { startTracing, type Tracing } from '../../src/telemetry/tracing.js';

export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly name: string;
  /** OTLP SpanKind: 2 server, 3 client. */
  readonly kind: number;
  readonly attributes: Readonly<Record<string, string | number | boolean>>;
  readonly serviceName: string | undefined;
}

export const SpanKind = { server: 2, client: 3 } as const;

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
}
interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}

function attributeMap(attributes: OtlpAttribute[] | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of attributes ?? []) {
    out[key] =
      value.stringValue ??
      value.boolValue ??
      value.doubleValue ??
      (value.intValue !== undefined ? Number(value.intValue) : '');
  }
  return out;
}

export interface OtlpReceiver {
  readonly url: string;
  readonly spans: ReceivedSpan[];
  /** Every request body as received, to search for what must never be exported. */
  readonly bodies: string[];
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const bodies: string[] = [];
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (
        request.method !== 'POST' ||
        request.url !== '/v1/traces' ||
        !/json/.test(request.headers['content-type'] ?? '')
      ) {
        response.writeHead(415).end();
        return;
      }
      const text = Buffer.concat(chunks).toString('utf8');
      bodies.push(text);
      const payload = JSON.parse(text) as {
        resourceSpans?: Array<{
          resource?: { attributes?: OtlpAttribute[] };
          scopeSpans?: Array<{
            spans?: Array<{
              traceId: string;
              spanId: string;
              parentSpanId?: string;
              name: string;
              kind: number;
              attributes?: OtlpAttribute[];
            }>;
          }>;
        }>;
      };
      for (const resourceSpans of payload.resourceSpans ?? []) {
        const serviceName = attributeMap(resourceSpans.resource?.attributes)['service.name'];
        for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
          for (const span of scopeSpans.spans ?? []) {
            spans.push({
              traceId: span.traceId,
              spanId: span.spanId,
              parentSpanId: span.parentSpanId ?? '',
              name: span.name,
              kind: span.kind,
              attributes: attributeMap(span.attributes),
              serviceName: typeof serviceName === 'string' ? serviceName : undefined,
            });
          }
        }
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    bodies,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * The OpenTelemetry SDK in this test file's process (one per file: vitest forks), exporting to an
 * OTLP receiver on 127.0.0.1: started before the file's tests and shut down after them. `before`
 * runs first (an OTEL_* variable the SDK reads as it starts).
 */
export function tracesExportedForFile(before?: () => void): {
  readonly receiver: OtlpReceiver;
  readonly tracing: Tracing;
} {
  let receiver: OtlpReceiver | undefined;
  let tracing: Tracing | undefined;
  beforeAll(async () => {
    before?.();
    receiver = await startOtlpReceiver();
    tracing = startTracing({ exporterUrl: `${receiver.url}/v1/traces` })!;
  });
  afterAll(async () => {
    await tracing?.shutdown();
    await receiver?.close();
  });
  return {
    get receiver() {
      return receiver!;
    },
    get tracing() {
      return tracing!;
    },
  };
}
