// Where spans go, read from the standard variables as the OpenTelemetry SDK's NodeSDK reads them
// (OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL), limited to what the gateway ships:
// OTLP over HTTP (protobuf, the default, or JSON) and the console. The exporters and the batch
// processor read the rest themselves (OTEL_EXPORTER_OTLP_*_ENDPOINT, _HEADERS, _TIMEOUT, OTEL_BSP_*).
import { OTLPTraceExporter as OtlpJsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtobufTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import {
  BatchSpanProcessor,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';

export interface SpanExport {
  readonly processors: SpanProcessor[];
  /** Exporters or protocols named that the gateway does not ship (e.g. `zipkin`, `otlp grpc`). */
  readonly unsupported: string[];
}

function listOf(value: string | undefined): string[] {
  const names = (value ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '' && name !== 'null');
  return [...new Set(names)];
}

/** The span processors the environment names; called only when it names an exporter other than `none`. */
export function spanExportFromEnvironment(env: NodeJS.ProcessEnv): SpanExport {
  let names = listOf(env.OTEL_TRACES_EXPORTER);
  // As the SDK: unset means otlp, and `none` beside another name is ignored in favour of otlp.
  if (names.length === 0 || (names.length > 1 && names.includes('none'))) names = ['otlp'];
  const processors: SpanProcessor[] = [];
  const unsupported: string[] = [];
  for (const name of names) {
    if (name === 'console') {
      processors.push(new SimpleSpanProcessor(new ConsoleSpanExporter()));
      continue;
    }
    if (name !== 'otlp') {
      unsupported.push(name);
      continue;
    }
    const protocol =
      env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim() || env.OTEL_EXPORTER_OTLP_PROTOCOL?.trim() || 'http/protobuf';
    if (protocol === 'http/protobuf') processors.push(new BatchSpanProcessor(new OtlpProtobufTraceExporter()));
    else if (protocol === 'http/json') processors.push(new BatchSpanProcessor(new OtlpJsonTraceExporter()));
    else unsupported.push(`otlp ${protocol}`);
  }
  return { processors, unsupported };
}
