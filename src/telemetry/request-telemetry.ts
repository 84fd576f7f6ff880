// The telemetry stage: every exchange, a call or an upgrade, refused or forwarded, answered or
// abandoned by its client, ends in exactly one metrics observation, one log line (written here
// only) and, for a call, one ended server span. A WebSocket stream is observed when it opens (101);
// its access line, when the access log is on, when it ends (as Envoy's access log is written at the
// end of an HTTP stream by default: Envoy docs, "Access logging").
import type { ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks'; // a module binding: no global lookup per call
import type { SpanContext } from '@opentelemetry/api';
import { CLIENT_CLOSED_STATUS, ErrorCodeLabels, outcomeCode } from '../errors.js';
import type { ConsumerObserver, EndedStream, Exchange, Stage } from '../exchange/exchange.js';
import { UNKNOWN_OPERATION, type Operation } from '../operations.js';
import { onResponseClose } from '../exchange/response-close.js';
import { continueTrace, formatTraceparent, traceIdOf } from '../trace-context.js';
import type { Logger } from 'pino';
import type { AccessLogConfig } from '../config/schema.js';
import { createAccessLog, type AccessLog } from './access-log.js';
import { requestLineWriter, scrubSecrets, type RequestLine } from './logging.js';
import type { GatewayMetrics } from './metrics.js';
import { endServerSpan, sampledTraceIdOf, serverSpanContextOf, serverSpanOf, traceresponse } from './server-span.js';
import type { Tracing } from './tracing.js';

const kState = Symbol('ledger-gateway.requestTelemetry');

interface RequestState {
  /** performance.now() when the first stage ran: the call's duration is measured from here. */
  readonly started: number;
  /** The upstream part (upstreamAnswered), for the access log. */
  upstreamMs: number | undefined;
  upstreamReplica: string | undefined;
  /** The operation counted in the in-flight gauge, once the route catalogue matched. */
  inflightOperation: string | undefined;
  finished: boolean;
  /** A 101 whose access line waits for its stream's end: the access log it was kept under. */
  streamAccessLog: AccessLog | undefined;
  /** The stream's end (streamEnded), for that line. */
  endedStream: EndedStream | undefined;
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
   * Tracing is on but nothing is exported (no SDK, no span): continue the caller's trace by hand on
   * `request.traceContext`, which the forwarder sends upstream as the one traceparent.
   */
  readonly propagateTraceContext?: boolean;
  /** Writes the request's one log line (logging.ts requestLineWriter); none when logging is off. */
  readonly writeLine?: (line: RequestLine) => void;
  /** Whose X-Forwarded-For is believed (server.trustedProxies), for the access log's client address. */
  readonly isTrustedProxy: (address: string) => boolean;
}

/** A refusal given before any exchange began (Node's parser, a target Fastify cannot decode). */
export interface UnroutedRefusal {
  readonly id: string;
  /** The request's method, or `_OTHER` when the parser gave up before one could be trusted. */
  readonly method: string;
  readonly status: number;
  readonly errorCode: string;
  readonly reason: string;
}

export interface RequestTelemetry {
  /** The first stage (for a call, after the tracing plugin's hook): the clock, the trace context, the watch on its end. */
  readonly begin: Stage;
  /** Once the operation is known: the exchange counts as in flight. */
  enter(exchange: Exchange): void;
  /**
   * An upgrade has its answer: 101 (its tunnel is open) or a refusal, the gateway's or the
   * participant's, whose code is on exchange.errorCode. A call's answer is seen on its response.
   */
  upgradeAnswered(exchange: Exchange, status: number): void;
  /** A 101's stream has ended: its access line, with the whole stream's duration and bytes. */
  streamEnded(exchange: Exchange, stream: EndedStream): void;
  /**
   * The call's upstream part, its time until the participant's answer head on `replica`: the upstream
   * histogram (with the trace as exemplar when exemplars are on) and, while it is on, the access log.
   */
  upstreamAnswered(exchange: Exchange, seconds: number, replica: string): void;
  /** The access log (log.access: its fields, sampling and redaction) from now on; off: the plain request line. */
  readonly followAccessLog: (access: AccessLogConfig) => void;
  /** Counts and logs a refusal that had no exchange, as operation unknown. */
  unroutedRefusal(refusal: UnroutedRefusal): void;
  /** Each finished exchange, with the status and code it is counted with, and each stream's end also go to `observer` (the consumers' usage). */
  observeFinishedWith(observer: ConsumerObserver): void;
  /**
   * The gateway is about to close every connection (the shutdown grace has ended, or a shutdown's
   * close): exchanges that end from now on without a complete answer were cut by the gateway, not
   * left by their clients.
   */
  cutOff(): void;
}

/** An exchange's state as its first stage begins it. */
function freshState(): RequestState {
  return {
    started: performance.now(),
    upstreamMs: undefined,
    upstreamReplica: undefined,
    inflightOperation: undefined,
    finished: false,
    streamAccessLog: undefined,
    endedStream: undefined,
  };
}

/** The exchange's state, set by begin (undefined for an exchange that never began). */
function stateOf(exchange: Exchange): RequestState | undefined {
  return (exchange as WithState)[kState];
}

/** The upstream part on the exchange, for its access line. */
function noteUpstream(exchange: Exchange, seconds: number, replica: string): void {
  const state = stateOf(exchange);
  if (state === undefined) return;
  state.upstreamMs = Math.round(seconds * 1e6) / 1e3;
  state.upstreamReplica = replica;
}

/**
 * Continues the caller's trace by hand, or reads the server span's context, for the traceresponse
 * header. An upgrade has no server span (Fastify's hooks never see it): its trace is continued without one.
 */
function startTrace(exchange: Exchange, propagateTraceContext: boolean): void {
  if (propagateTraceContext || exchange.kind === 'upgrade') {
    const context = continueTrace(exchange.raw.headers);
    exchange.traceContext = context;
    exchange.traceresponse = formatTraceparent(context);
  } else {
    const spanContext = serverSpanContextOf(exchange);
    if (spanContext !== undefined) exchange.traceresponse = traceresponse(spanContext);
  }
}

/**
 * The answer was broken off by the participant, or ended by the gateway because its client stopped
 * reading: that ends the connection too, but it is not the client leaving.
 */
function answerCut(exchange: Exchange): boolean {
  return (
    exchange.errorCode === ErrorCodeLabels.upstreamAnswerBroken || exchange.errorCode === ErrorCodeLabels.clientStalled
  );
}

/**
 * A closed call's status (finishCall): its client gone (`clientLeft`), or `cutOff` by the gateway at
 * shutdown, which is a 5xx unless an answer was under way.
 */
function callStatus(response: ServerResponse, clientLeft: boolean, cutOff: boolean, cut: boolean): number {
  if (cutOff) return response.headersSent ? response.statusCode : 503;
  return clientLeft && !cut ? CLIENT_CLOSED_STATUS : response.statusCode;
}

/** The code of a closed call, from the same facts as its callStatus. */
function callCode(exchange: Exchange, status: number, clientLeft: boolean, cutOff: boolean, cut: boolean): string {
  if (cut) return exchange.errorCode!;
  if (cutOff) return ErrorCodeLabels.shutdownGraceElapsed;
  return clientLeft ? ErrorCodeLabels.clientClosedRequest : outcomeCode(status, exchange.errorCode);
}

/** Ends a call's server span, named by its route, when tracing exports one (the attributes are built only then). */
function endSpan(
  exchange: Exchange,
  operation: Operation | undefined,
  operationName: string,
  method: string,
  status: number,
  code: string,
): void {
  if (serverSpanOf(exchange) === undefined) return;
  endServerSpan(exchange, operation === undefined ? method : `${method} ${operation.template}`, {
    [SpanAttributes.operation]: operationName,
    [SpanAttributes.errorCode]: code,
    [SpanAttributes.status]: status,
    ...(operation !== undefined && { [SpanAttributes.route]: operation.template }),
  });
}

/** The exchange's one log line: fixed fields only, the refusal reason scrubbed of secrets. */
function requestLine(
  exchange: Exchange,
  state: RequestState,
  accessLog: AccessLog | undefined,
  operationName: string,
  status: number,
  code: string,
  seconds: number,
  spanContext: SpanContext | undefined,
): RequestLine {
  const propagated = exchange.traceContext;
  return {
    reqId: exchange.id,
    operation: operationName,
    method: exchange.raw.method!,
    status,
    errorCode: code,
    durationMs: Math.round(seconds * 1e6) / 1e3,
    traceId: propagated?.traceId ?? spanContext?.traceId ?? traceIdOf(exchange),
    spanId: propagated?.spanId ?? spanContext?.spanId ?? null,
    // A non-string reason must not throw here.
    ...(exchange.refusalReason !== undefined && { reason: scrubSecrets(String(exchange.refusalReason)) }),
    // A plain property, not a second spread: the line's object stays one fast literal.
    access:
      accessLog === undefined
        ? undefined
        : accessLog.fields(exchange, {
            startedAt: performance.timeOrigin + state.started,
            upstreamMs: state.upstreamMs,
            upstreamReplica: state.upstreamReplica,
            stream: state.endedStream,
          }),
  };
}

/** Counts and logs a refusal that had no exchange, as operation unknown. */
function countUnroutedRefusal(
  metrics: GatewayMetrics,
  writeLine: ((line: RequestLine) => void) | undefined,
  refusal: UnroutedRefusal,
): void {
  metrics.observeRequest(UNKNOWN_OPERATION.name, refusal.method, refusal.status, refusal.errorCode, 0);
  writeLine?.({
    reqId: refusal.id,
    operation: UNKNOWN_OPERATION.name,
    method: refusal.method,
    status: refusal.status,
    errorCode: refusal.errorCode,
    durationMs: 0,
    traceId: null,
    spanId: null,
    reason: scrubSecrets(refusal.reason),
  });
}

export function createRequestTelemetry(metrics: GatewayMetrics, options: RequestTelemetryOptions): RequestTelemetry {
  const propagateTraceContext = options.propagateTraceContext ?? false;
  const writeLine = options.writeLine;
  let cuttingOff = false;
  let accessLog: AccessLog | undefined;
  let observeFinished: ConsumerObserver | undefined;

  /** A call's outcome, read from its response once it closed (answered, or its client gone). */
  function finishCall(exchange: Exchange, response: ServerResponse): void {
    const clientLeft = !response.writableFinished;
    // Cut when the shutdown grace ended: the gateway's doing. It wins over UPSTREAM_ANSWER_BROKEN, which
    // the upstream pool's destruction at close reports for an answer under way before the client's
    // socket close is seen.
    const cutOff = clientLeft && cuttingOff && exchange.errorCode !== ErrorCodeLabels.clientStalled;
    const cut = !cutOff && clientLeft && answerCut(exchange);
    const status = callStatus(response, clientLeft, cutOff, cut);
    finish(exchange, status, callCode(exchange, status, clientLeft, cutOff, cut));
  }

  /** An upgrade whose socket closed before it was answered: its client left, or the gateway cut it at shutdown. */
  function finishUnanswered(exchange: Exchange): void {
    if (cuttingOff) finish(exchange, 503, ErrorCodeLabels.shutdownGraceElapsed);
    else finish(exchange, CLIENT_CLOSED_STATUS, ErrorCodeLabels.clientClosedRequest);
  }

  /** The one observation and the one line, with the same code. */
  function finish(exchange: Exchange, status: number, code: string): void {
    const state = stateOf(exchange);
    if (state === undefined || state.finished) return;
    state.finished = true;
    if (state.inflightOperation !== undefined) metrics.inflight(state.inflightOperation, -1);

    // exchange.operation is still unset when the first stage refused the target (not exposed, bad path).
    const operation = (exchange.operation as Operation | null) ?? undefined;
    const operationName = operation?.name ?? UNKNOWN_OPERATION.name;
    const method = exchange.raw.method!;
    const seconds = (performance.now() - state.started) / 1000;
    metrics.observeRequest(
      operationName,
      method,
      status,
      code,
      seconds,
      metrics.exemplars ? sampledTraceIdOf(exchange) : undefined,
    );
    observeFinished?.finished(exchange, status, code, seconds);
    // The span's ids are read before it ends: the line carries them.
    const propagated = exchange.traceContext;
    const spanContext = propagated === undefined ? serverSpanContextOf(exchange) : undefined;
    if (propagated === undefined) endSpan(exchange, operation, operationName, method, status, code);
    // A sampled-out success writes no line (log.access.successSampleRatio); a refusal always does.
    if (writeLine === undefined || (accessLog !== undefined && !accessLog.keeps(status))) return;
    // A stream's access line is written when it ends (streamEnded), under the access log it opened with.
    if (status === 101 && accessLog !== undefined) {
      state.streamAccessLog = accessLog;
      return;
    }
    writeLine(requestLine(exchange, state, accessLog, operationName, status, code, seconds, spanContext));
  }

  /** A stream's access line, kept back at its 101: its duration from the first stage to the tunnel's close. */
  function streamEnded(exchange: Exchange, stream: EndedStream): void {
    observeFinished?.streamEnded(exchange, stream);
    const state = stateOf(exchange);
    const kept = state?.streamAccessLog;
    if (state === undefined || kept === undefined || writeLine === undefined) return;
    state.streamAccessLog = undefined;
    state.endedStream = stream;
    const seconds = (performance.now() - state.started) / 1000;
    const code = outcomeCode(101, exchange.errorCode);
    writeLine(requestLine(exchange, state, kept, exchange.operation.name, 101, code, seconds, undefined));
  }

  return {
    begin(exchange) {
      (exchange as WithState)[kState] = freshState();
      startTrace(exchange, propagateTraceContext);
      // A call's response closes once its answer is complete, or when its client left before that;
      // an upgrade is answered before its socket closes (upgradeAnswered), unless its client leaves.
      const lifeline = exchange.lifeline;
      if (exchange.kind === 'call') onResponseClose(lifeline, () => finishCall(exchange, lifeline as ServerResponse));
      else onResponseClose(lifeline, () => finishUnanswered(exchange));
    },
    enter(exchange) {
      const state = stateOf(exchange);
      if (state === undefined || state.inflightOperation !== undefined) return;
      state.inflightOperation = exchange.operation.name;
      metrics.inflight(state.inflightOperation, 1);
    },
    upstreamAnswered(exchange, seconds, replica) {
      metrics.observeUpstream(
        exchange.operation.name,
        seconds,
        metrics.exemplars ? sampledTraceIdOf(exchange) : undefined,
      );
      if (accessLog !== undefined) noteUpstream(exchange, seconds, replica);
    },
    followAccessLog: (access) => {
      accessLog = access.enabled ? createAccessLog(access, options.isTrustedProxy) : undefined;
    },
    upgradeAnswered(exchange, status) {
      // A 101 is counted when the stream opens, with the code its metric label has (`none`), and its
      // plain line written then (how the stream ended is its 'stream ended' line); its access line waits.
      finish(exchange, status, outcomeCode(status, exchange.errorCode));
    },
    streamEnded,
    unroutedRefusal: (refusal) => countUnroutedRefusal(metrics, writeLine, refusal),
    observeFinishedWith(observer) {
      observeFinished = observer;
    },
    cutOff() {
      cuttingOff = true;
    },
  };
}

/** The tracing started in this process (loaded only when tracing is on: the SDK is heavy). */
async function runningTracing(): Promise<Tracing> {
  const { activeTracing } = await import('./tracing.js');
  const tracing = activeTracing();
  if (tracing === undefined)
    throw new Error('tracingActive is set but startTracing() has not run in this process (or OTEL_SDK_DISABLED=true)');
  return tracing;
}

/** The request telemetry and how traces travel: exported by the SDK's server spans, or propagated by hand. */
export async function startRequestTelemetry(
  metrics: GatewayMetrics,
  logger: false | Logger,
  options: { readonly tracingActive: boolean; readonly isTrustedProxy: (address: string) => boolean },
) {
  const tracing = options.tracingActive ? await runningTracing() : undefined;
  const serverSpanPlugin = tracing?.fastifyPlugin;
  const propagateTraceContext = tracing !== undefined && serverSpanPlugin === undefined;
  const writeLine = logger === false ? undefined : requestLineWriter(logger);
  const requestTelemetry = createRequestTelemetry(metrics, {
    propagateTraceContext,
    isTrustedProxy: options.isTrustedProxy,
    ...(writeLine !== undefined && { writeLine }),
  });
  return { tracing, serverSpanPlugin, propagateTraceContext, writeLine, requestTelemetry };
}
