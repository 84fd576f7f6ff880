// The telemetry stage: every exchange, a call or an upgrade, refused or forwarded, answered or
// abandoned by its client, ends in exactly one metrics observation, one log line (written here
// only) and, for a call, one ended server span.
import type { ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks'; // a module binding: no global lookup per call
import { CLIENT_CLOSED_STATUS, ErrorCodeLabels, outcomeCode } from '../errors.js';
import type { Exchange, Stage } from '../exchange/exchange.js';
import { UNKNOWN_OPERATION, type Operation } from '../operations.js';
import { traceIdOf } from '../exchange/request-context.js';
import { onResponseClose } from '../exchange/response-close.js';
import { continueTrace, formatTraceparent } from '../trace-context.js';
import type { AccessLog } from './access-log.js';
import { scrubSecrets, type RequestLine } from './logging.js';
import type { GatewayMetrics } from './metrics.js';
import { endServerSpan, sampledTraceIdOf, serverSpanContextOf, serverSpanOf, traceresponse } from './server-span.js';

const kState = Symbol('ledger-gateway.requestTelemetry');

interface RequestState {
  /** performance.now() when the first stage ran: the call's duration is measured from here. */
  readonly started: number;
  /** The upstream part (noteUpstream), for the access log. */
  upstreamMs: number | undefined;
  upstreamReplica: string | undefined;
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
   * Tracing is on but nothing is exported (no SDK, no span): continue the caller's trace by hand on
   * `request.traceContext`, which the forwarder sends upstream as the one traceparent.
   */
  readonly propagateTraceContext?: boolean;
  /** Writes the request's one log line (logging.ts requestLineWriter); none when logging is off. */
  readonly writeLine?: (line: RequestLine) => void;
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
  /** Why a stage refused the exchange: written on its log line. */
  noteRefusal(exchange: Exchange, reason: string): void;
  /**
   * An upgrade has its answer: 101 (its tunnel is open) or a refusal, the gateway's or the
   * participant's, whose code is on exchange.errorCode. A call's answer is seen on its response.
   */
  upgradeAnswered(exchange: Exchange, status: number): void;
  /** The call's upstream part: its time until the answer head and the replica (the access log's). */
  noteUpstream(exchange: Exchange, seconds: number, replica: string): void;
  /** The access log (log.access) from now on; undefined: the plain request line. */
  setAccessLog(accessLog: AccessLog | undefined): void;
  /** Counts and logs a refusal that had no exchange, as operation unknown. */
  unroutedRefusal(refusal: UnroutedRefusal): void;
  /**
   * The gateway is about to close every connection (the shutdown grace has ended, or a shutdown's
   * close): exchanges that end from now on without a complete answer were cut by the gateway, not
   * left by their clients.
   */
  cutOff(): void;
}

export function createRequestTelemetry(
  metrics: GatewayMetrics,
  options: RequestTelemetryOptions = {},
): RequestTelemetry {
  const propagateTraceContext = options.propagateTraceContext ?? false;
  const writeLine = options.writeLine;
  let cuttingOff = false;
  let accessLog: AccessLog | undefined;

  /** A call's outcome, read from its response once it closed (answered, or its client gone). */
  function finishCall(exchange: Exchange, response: ServerResponse): void {
    const clientLeft = !response.writableFinished;
    // An answer the participant broke off, or one the gateway ended because its client stopped
    // reading, ends the connection too, but it is not the client leaving.
    // Cut when the shutdown grace ended: the gateway's doing, so a 5xx unless an answer was under way.
    // It wins over UPSTREAM_ANSWER_BROKEN, which the upstream pool's destruction at close reports
    // for an answer under way before the client's socket close is seen.
    const cutOff = clientLeft && cuttingOff && exchange.errorCode !== ErrorCodeLabels.clientStalled;
    const cut =
      !cutOff &&
      clientLeft &&
      (exchange.errorCode === ErrorCodeLabels.upstreamAnswerBroken ||
        exchange.errorCode === ErrorCodeLabels.clientStalled);
    const status = cutOff
      ? response.headersSent
        ? response.statusCode
        : 503
      : clientLeft && !cut
        ? CLIENT_CLOSED_STATUS
        : response.statusCode;
    const code = cut
      ? exchange.errorCode!
      : cutOff
        ? ErrorCodeLabels.shutdownGraceElapsed
        : clientLeft
          ? ErrorCodeLabels.clientClosedRequest
          : outcomeCode(status, exchange.errorCode);
    finish(exchange, status, code);
  }

  /** An upgrade whose socket closed before it was answered: its client left, or the gateway cut it at shutdown. */
  function finishUnanswered(exchange: Exchange): void {
    if (cuttingOff) {
      const code = ErrorCodeLabels.shutdownGraceElapsed;
      finish(exchange, 503, code);
    } else {
      const code = ErrorCodeLabels.clientClosedRequest;
      finish(exchange, CLIENT_CLOSED_STATUS, code);
    }
  }

  /** The one observation and the one line, with the same code. */
  function finish(exchange: Exchange, status: number, code: string): void {
    const state = (exchange as WithState)[kState];
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

    const propagated = exchange.traceContext;
    const spanContext = propagated === undefined ? serverSpanContextOf(exchange) : undefined;
    // The attributes are built only for a span that exists (a call's, with tracing exporting).
    if (propagated === undefined && serverSpanOf(exchange) !== undefined)
      endServerSpan(exchange, operation === undefined ? method : `${method} ${operation.template}`, {
        [SpanAttributes.operation]: operationName,
        [SpanAttributes.errorCode]: code,
        [SpanAttributes.status]: status,
        ...(operation !== undefined && { [SpanAttributes.route]: operation.template }),
      });
    // A sampled-out success writes no line (log.access.successSampleRatio); a refusal always does.
    if (writeLine === undefined || (accessLog !== undefined && !accessLog.keeps(status))) return;
    // Fixed fields only; the reason was scrubbed when noted.
    writeLine({
      reqId: exchange.id,
      operation: operationName,
      method,
      status,
      errorCode: code,
      durationMs: Math.round(seconds * 1e6) / 1e3,
      traceId: propagated?.traceId ?? spanContext?.traceId ?? traceIdOf(exchange),
      spanId: propagated?.spanId ?? spanContext?.spanId ?? null,
      ...(state.reason !== undefined && { reason: state.reason }),
      // A plain property, not a second spread: the line's object stays one fast literal.
      access:
        accessLog === undefined
          ? undefined
          : accessLog.fields(exchange, {
              startedAt: performance.timeOrigin + state.started,
              upstreamMs: state.upstreamMs,
              upstreamReplica: state.upstreamReplica,
            }),
    });
  }

  return {
    begin(exchange) {
      (exchange as WithState)[kState] = {
        started: performance.now(),
        upstreamMs: undefined,
        upstreamReplica: undefined,
        inflightOperation: undefined,
        finished: false,
        reason: undefined,
      };
      // An upgrade has no server span (Fastify's hooks never see it): its trace is continued without one.
      if (propagateTraceContext || exchange.kind === 'upgrade') {
        const context = continueTrace(exchange.raw.headers);
        exchange.traceContext = context;
        exchange.traceresponse = formatTraceparent(context);
      } else {
        const spanContext = serverSpanContextOf(exchange);
        if (spanContext !== undefined) exchange.traceresponse = traceresponse(spanContext);
      }
      // A call's response closes once its answer is complete, or when its client left before that;
      // an upgrade is answered before its socket closes (upgradeAnswered), unless its client leaves.
      const lifeline = exchange.lifeline;
      if (exchange.kind === 'call') onResponseClose(lifeline, () => finishCall(exchange, lifeline as ServerResponse));
      else onResponseClose(lifeline, () => finishUnanswered(exchange));
    },
    enter(exchange) {
      const state = (exchange as WithState)[kState];
      if (state === undefined || state.inflightOperation !== undefined) return;
      state.inflightOperation = exchange.operation.name;
      metrics.inflight(state.inflightOperation, 1);
    },
    noteRefusal(exchange, reason) {
      const state = (exchange as WithState)[kState];
      if (state !== undefined) state.reason = scrubSecrets(String(reason)); // a non-string reason must not throw here
    },
    noteUpstream(exchange, seconds, replica) {
      const state = (exchange as WithState)[kState];
      if (state === undefined) return;
      state.upstreamMs = Math.round(seconds * 1e6) / 1e3;
      state.upstreamReplica = replica;
    },
    setAccessLog(next) {
      accessLog = next;
    },
    upgradeAnswered(exchange, status) {
      // A 101 is written when the stream opens, with the code its metric label has (`none`);
      // how the stream ended is its 'stream ended' line.
      const code = outcomeCode(status, exchange.errorCode);
      finish(exchange, status, code);
    },
    unroutedRefusal(refusal) {
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
    },
    cutOff() {
      cuttingOff = true;
    },
  };
}
