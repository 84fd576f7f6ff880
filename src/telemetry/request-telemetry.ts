// The telemetry stage: every HTTP request, refused or forwarded, answered or abandoned by its
// client, ends in exactly one metrics observation, one ended server span and one log line.
import { performance } from 'node:perf_hooks'; // a module binding: no global lookup per call
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Stage } from '../stage-runner.js';
import { UNKNOWN_OPERATION } from '../operations.js';
import { UpstreamCodes } from '../proxy/upstream-error-code.js';
import { traceIdOf } from '../request-context.js';
import { onResponseClose } from '../response-close.js';
import { scrubSecrets, type RequestLine } from './logging.js';
import { CLIENT_CLOSED_STATUS, ErrorCodeLabels, type GatewayMetrics } from './metrics.js';
import { endServerSpan, sampledTraceIdOf, serverSpanContextOf, serverSpanOf, traceresponse } from './server-span.js';
import { continueTrace, formatTraceparent } from './trace-context.js';

const kState = Symbol('ledger-gateway.requestTelemetry');

interface RequestState {
  /** performance.now() when the first stage ran: the call's duration is measured from here. */
  readonly started: number;
  /** The operation counted in the in-flight gauge, once the route catalogue matched. */
  inflightOperation: string | undefined;
  finished: boolean;
  /** Why a stage refused the request (for the log line only; never a label). */
  reason: string | undefined;
}

type WithState = { [kState]?: RequestState };

/** Span attributes: the operation, the status, the error code; never a token or a body. */
export const SpanAttributes = {
  operation: 'ledger_gateway.operation',
  errorCode: 'ledger_gateway.error_code',
  status: 'http.response.status_code',
  route: 'http.route',
} as const;

export interface RequestTelemetryOptions {
  /**
   * Tracing is on but nothing is exported (no SDK, no span): continue the caller's trace on
   * `request.traceContext`, which the forwarder injects upstream (trace-context.ts).
   */
  readonly propagateTraceContext?: boolean;
  /** Writes the request's one log line (logging.ts requestLineWriter); none when logging is off. */
  readonly writeLine?: (line: RequestLine) => void;
}

export interface RequestTelemetry {
  /** The first stage (after the tracing plugin's hook): trace context, the traceresponse for the answer, watch for a client that leaves. */
  readonly begin: Stage;
  /** Once the operation is known: the request counts as in flight. */
  enter(request: FastifyRequest): void;
  /** Why a stage refused the request: written on its log line. */
  noteRefusal(request: FastifyRequest, reason: string): void;
  /**
   * The shutdown grace has ended and the gateway is about to close every connection: calls that
   * end from now on without a complete answer were cut by the gateway, not left by their clients.
   */
  cutOff(): void;
}

/** The error code of a finished request: none, or the gateway's or the participant's code. */
export function outcomeCode(status: number, errorCode: string | null): string {
  if (errorCode !== null) return errorCode;
  return status >= 400 ? UpstreamCodes.unrecognized : ErrorCodeLabels.none;
}

export function createRequestTelemetry(metrics: GatewayMetrics, options: RequestTelemetryOptions = {}): RequestTelemetry {
  const propagateTraceContext = options.propagateTraceContext ?? false;
  const writeLine = options.writeLine;
  let cuttingOff = false;

  function finish(request: FastifyRequest, reply: FastifyReply, clientLeft: boolean): void {
    const state = (request as WithState)[kState];
    if (state === undefined || state.finished) return;
    state.finished = true;
    if (state.inflightOperation !== undefined) metrics.inflight(state.inflightOperation, -1);

    // request.operation is still unset when the first stage refused the target (not exposed, bad path).
    const operation = (request.operation as typeof request.operation | null) ?? undefined;
    const operationName = operation?.name ?? UNKNOWN_OPERATION.name;
    // An answer the participant broke off, or one the gateway ended because its client stopped
    // reading, ends the connection too, but it is not the client leaving.
    // Cut when the shutdown grace ended: the gateway's doing, so a 5xx unless an answer was under way.
    // It wins over UPSTREAM_ANSWER_BROKEN, which the upstream pool's destruction at close reports
    // for an answer under way before the client's socket close is seen.
    const cutOff = clientLeft && cuttingOff && request.errorCode !== ErrorCodeLabels.clientStalled;
    const cut = !cutOff && clientLeft && (request.errorCode === ErrorCodeLabels.upstreamAnswerBroken || request.errorCode === ErrorCodeLabels.clientStalled);
    const status = cutOff ? (reply.raw.headersSent ? reply.statusCode : 503) : clientLeft && !cut ? CLIENT_CLOSED_STATUS : reply.statusCode;
    const code = cut ? request.errorCode! : cutOff ? ErrorCodeLabels.shutdownGraceElapsed : clientLeft ? ErrorCodeLabels.clientClosedRequest : outcomeCode(status, request.errorCode);
    const seconds = (performance.now() - state.started) / 1000;
    metrics.observeRequest(operationName, request.method, status, code, seconds, metrics.exemplars ? sampledTraceIdOf(request) : undefined);

    const propagated = request.traceContext;
    const spanContext = propagated === undefined ? serverSpanContextOf(request) : undefined;
    // The attributes are built only for a span that exists (none with tracing off, OTEL_SDK_DISABLED).
    if (propagated === undefined && serverSpanOf(request) !== undefined) endServerSpan(request, operation === undefined ? request.method : `${request.method} ${operation.template}`, {
      [SpanAttributes.operation]: operationName,
      [SpanAttributes.errorCode]: code,
      [SpanAttributes.status]: status,
      ...(operation !== undefined && { [SpanAttributes.route]: operation.template }),
    });
    // Fixed fields only; the reason was scrubbed when noted.
    writeLine?.({
      reqId: request.id,
      operation: operationName,
      method: request.method,
      status,
      errorCode: code,
      durationMs: Math.round(seconds * 1e6) / 1e3,
      traceId: propagated?.traceId ?? spanContext?.traceId ?? traceIdOf(request),
      spanId: propagated?.spanId ?? spanContext?.spanId ?? null,
      ...(state.reason !== undefined && { reason: state.reason }),
    });
  }

  return {
    begin(request, reply) {
      (request as WithState)[kState] = { started: performance.now(), inflightOperation: undefined, finished: false, reason: undefined };
      if (propagateTraceContext) {
        const context = continueTrace(request.headers);
        request.traceContext = context;
        request.traceresponse = formatTraceparent(context);
      } else {
        const spanContext = serverSpanContextOf(request);
        if (spanContext !== undefined) request.traceresponse = traceresponse(spanContext);
      }
      // The response closes once its answer is complete, or when its client left before that.
      onResponseClose(reply.raw, () => finish(request, reply, !reply.raw.writableFinished));
    },
    enter(request) {
      const state = (request as WithState)[kState];
      if (state === undefined || state.inflightOperation !== undefined) return;
      state.inflightOperation = request.operation.name;
      metrics.inflight(state.inflightOperation, 1);
    },
    noteRefusal(request, reason) {
      const state = (request as WithState)[kState];
      if (state !== undefined) state.reason = scrubSecrets(String(reason)); // a non-string reason must not throw here
    },
    cutOff() {
      cuttingOff = true;
    },
  };
}
