// OpenTelemetry tracing: a tracer provider with the OTLP/HTTP exporter (not the NodeSDK, whose
// metrics, logs, gRPC and Zipkin exporters the gateway never uses: 200 MB of dependencies),
// @fastify/otel for the server span, the undici instrumentation for the call to the participant.
// Started by the process before Fastify loads (`node --import ./dist/telemetry/register.js
// dist/main.js`), or in-process by a test.
//
// Configured by the standard OTEL_* environment variables (OTEL_SDK_DISABLED, OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER(_ARG), OTEL_PROPAGATORS, OTEL_EXPORTER_OTLP_*,
// OTEL_TRACES_EXPORTER). One difference from the SDK's defaults: without an exporter named
// (no OTEL_TRACES_EXPORTER, no OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT) nothing is exported, instead
// of sending to localhost:4318, and the SDK is not started at all: spans nobody receives cost a
// large share of a proxied call's CPU (docs/performance.md). Trace context is then propagated without a span
// (src/trace-context.ts): continued, given to the participant and returned in `traceresponse`. Either
// way the propagators are the ones OTEL_PROPAGATORS names (trace-context.ts builds them once).
import { FastifyOtelInstrumentation } from '@fastify/otel';
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import {
  defaultResource,
  detectResources,
  envDetector,
  hostDetector,
  processDetector,
  resourceFromAttributes,
  type Resource,
} from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import {
  ATTR_SERVICE_NAME,
  ATTR_SERVICE_VERSION,
  ATTR_URL_FULL,
  ATTR_URL_PATH,
  ATTR_URL_QUERY,
} from '@opentelemetry/semantic-conventions';
import type { FastifyPluginCallback } from 'fastify';
import { BUILD_VERSION, SERVICE_NAME } from './build-info.js';
import { holdServerSpan } from './server-span.js';
import { spanExportFromEnvironment, type SpanExport } from './span-export.js';
import { configuredPropagation } from '../trace-context.js';

export interface TracingOptions {
  /** Export spans as OTLP/HTTP JSON to this URL (tests), whatever the environment says. */
  readonly exporterUrl?: string;
}

export interface Tracing {
  /**
   * Registered first on the API instance: opens every request's server span. Absent when nothing
   * is exported: no span exists, and the telemetry stage propagates the context by hand.
   */
  readonly fastifyPlugin: FastifyPluginCallback | undefined;
  /** Whether spans leave the process; false: context is propagated (without spans), nothing is exported. */
  readonly exporting: boolean;
  /** The OTEL_PROPAGATORS names in use, and those given that no propagator answers to. */
  readonly propagators: { readonly names: readonly string[]; readonly unknown: readonly string[] };
  /** OTEL_TRACES_EXPORTER names or OTLP protocols the gateway does not ship (then ignored). */
  readonly unsupportedExporters: readonly string[];
  /** Export the spans ended so far (tests, shutdown). */
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
}

/** A query parameter name kept as is in span attributes; any other name is redacted too. */
const PLAIN_NAME = /^[\w.\-[\]%]{1,64}$/;

/**
 * A query string (without its "?") with every value replaced by REDACTED, for span attributes: a
 * value may be a token (`?access_token=`) or a user id (OpenTelemetry's url.query convention says
 * to scrub what may be sensitive). Names stay, unless they do not look like names; an element
 * without "=" is all value (a bare token, say) and is redacted whole.
 */
export function redactQuery(query: string): string {
  if (query === '') return '';
  return query
    .split('&')
    .map((pair) => {
      const equals = pair.indexOf('=');
      if (equals === -1) return pair === '' ? '' : 'REDACTED';
      const name = pair.slice(0, equals);
      return `${name === '' || PLAIN_NAME.test(name) ? name : 'REDACTED'}=REDACTED`;
    })
    .join('&');
}

let active: Tracing | undefined;

/** The running tracing, if startTracing ran in this process and the SDK is not disabled. */
export function activeTracing(): Tracing | undefined {
  return active;
}

function isTrue(value: string | undefined): boolean {
  return value?.trim().toLowerCase() === 'true';
}

/** Whether the environment names a trace exporter (then the SDK builds it from OTEL_*). */
export function environmentExportsTraces(env: NodeJS.ProcessEnv): boolean {
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  if (exporters.length > 0) return exporters[0] !== 'none';
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
}

function namesService(env: NodeJS.ProcessEnv): boolean {
  return (
    Boolean(env.OTEL_SERVICE_NAME?.trim()) || /(?:^|,)\s*service\.name\s*=/.test(env.OTEL_RESOURCE_ATTRIBUTES ?? '')
  );
}

/** The resource as the NodeSDK built it: its defaults, our version, the env, process and host detectors, our name unless the env names one. */
function tracingResource(env: NodeJS.ProcessEnv): Resource {
  const resource = defaultResource()
    .merge(resourceFromAttributes({ [ATTR_SERVICE_VERSION]: BUILD_VERSION }))
    .merge(detectResources({ detectors: [envDetector, processDetector, hostDetector] }));
  return namesService(env) ? resource : resource.merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: SERVICE_NAME }));
}

function chosenSpanExport(options: TracingOptions, env: NodeJS.ProcessEnv): SpanExport {
  if (options.exporterUrl !== undefined) {
    const exporter = new OTLPTraceExporter({ url: options.exporterUrl });
    return { processors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 200 })], unsupported: [] };
  }
  return environmentExportsTraces(env) ? spanExportFromEnvironment(env) : { processors: [], unsupported: [] };
}

/**
 * Starts tracing once per process and returns it: the SDK when spans are exported, propagation
 * without spans when not; undefined when OTEL_SDK_DISABLED=true (then no trace context is touched and the
 * client's traceparent is forwarded as it came).
 */
export function startTracing(options: TracingOptions = {}): Tracing | undefined {
  if (active !== undefined) return active;
  const env = process.env;
  if (isTrue(env.OTEL_SDK_DISABLED)) return undefined;
  const configured = configuredPropagation();
  const propagators = { names: configured.names, unknown: configured.unknown };
  const spanExport = chosenSpanExport(options, env);
  if (spanExport.processors.length === 0) {
    const nothing = async () => {};
    active = {
      fastifyPlugin: undefined,
      exporting: false,
      propagators,
      unsupportedExporters: spanExport.unsupported,
      forceFlush: nothing,
      shutdown: nothing,
    };
    return active;
  }

  const fastifyOtel = new FastifyOtelInstrumentation({
    // One server span per request; the stages are not worth a span each.
    instrumentHooks: false,
    instrumentHandler: false,
    // Refusals are answers, not exceptions; their code is an attribute. No stack traces in spans.
    recordExceptions: false,
    requestHook: (span, request) => {
      // @fastify/otel puts the whole request target in url.path: a query (or a fragment, which the
      // gateway refuses, but after the span has begun) may carry a token.
      const target = request.url;
      const end = target.search(/[?#]/);
      if (end !== -1) {
        const hash = target.indexOf('#', end);
        const query = target[end] === '?' ? target.slice(end + 1, hash === -1 ? undefined : hash) : undefined;
        span.setAttributes({
          [ATTR_URL_PATH]: target.slice(0, end),
          ...(query !== undefined && { [ATTR_URL_QUERY]: redactQuery(query) }),
        });
      }
      holdServerSpan(request, span);
    },
  });
  const undici = new UndiciInstrumentation({
    // Only calls made for a request (the forwarder, a key set fetch during one) get a client
    // span and a traceparent; the readiness probe and background refreshes do not.
    requireParentforSpans: true,
    // The span's own url.full and url.query would carry the query's values, a token among them.
    startSpanHook: (request) => {
      const question = request.path.indexOf('?');
      if (question === -1) return {};
      const query = redactQuery(request.path.slice(question + 1));
      return {
        [ATTR_URL_FULL]: `${request.origin}${request.path.slice(0, question)}?${query}`,
        [ATTR_URL_QUERY]: query,
      };
    },
  });

  const provider = new BasicTracerProvider({ resource: tracingResource(env), spanProcessors: spanExport.processors });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  // The propagators the spanless path uses (trace-context.ts), so both paths read and write the same headers.
  propagation.setGlobalPropagator(configured.propagator);
  trace.setGlobalTracerProvider(provider);
  fastifyOtel.setTracerProvider(provider);
  undici.setTracerProvider(provider);

  active = {
    fastifyPlugin: fastifyOtel.plugin(),
    exporting: true,
    propagators,
    unsupportedExporters: spanExport.unsupported,
    forceFlush: () => provider.forceFlush(),
    shutdown: () => provider.shutdown(),
  };
  return active;
}
