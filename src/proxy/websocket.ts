// WebSocket streams: the upgrade passes the same stages as any call (operation, authentication,
// authorization), then the connection becomes a byte tunnel to the participant.
//
// A tunnel rather than @fastify/http-proxy's WebSocket support, which terminates the socket and
// opens a new one offering only the first subprotocol; Canton needs both `jwt.token.<JWT>` and
// `daml.ws.auth` (FACTS.md §4.1). Forwarding the upgrade request itself keeps every offered
// subprotocol, extension and frame exactly as the client sent them.
import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import type { GatewayConfig } from '../config/schema.js';
import { Errors, GatewayError, renderCantonError } from '../errors.js';
import { matchOperation, matchWebSocketOperation, pathOf, UNKNOWN_OPERATION, type Operation } from '../operations.js';
import { connectionOptionProblem, framingProblem, framingRefusal, requestTargetProblem } from '../request-context.js';
import { continueTrace, formatTraceparent, injectTraceContext, traceContextFields } from '../telemetry/trace-context.js';
import type { TraceContext } from '../telemetry/trace-context.js';
import { forwardedFor, upstreamRequestHeaders } from './headers.js';
import { scrubSecrets } from '../telemetry/logging.js';
import { ErrorCodeLabels } from '../telemetry/metrics.js';
import { ERROR_BODY_CAPTURE_BYTES, upstreamErrorCode } from './upstream-error-code.js';
import { upstreamFailure } from './upstream-failure.js';
import { upstreamTlsOptions } from './forward.js';

export interface UpgradeOutcome {
  readonly operation: Operation;
  /** 101 when tunnelled, else the status answered. */
  readonly status: number;
  readonly errorCode: string | null;
  readonly durationSeconds: number;
}

export interface WebSocketProxyOptions {
  readonly upstreamUrl: string;
  readonly config: GatewayConfig;
  readonly isTrustedProxy: (address: string) => boolean;
  /** The gateway's stages for an upgrade: throws a GatewayError to refuse it. */
  readonly admit: (request: http.IncomingMessage, operation: Operation) => Promise<void>;
  readonly correlationId: () => string;
  readonly onOutcome?: (outcome: UpgradeOutcome) => void;
  readonly log: { warn(object: object, message: string): void; info(object: object, message: string): void };
}

export interface WebSocketProxy {
  /** The 'upgrade' listener for the API server. */
  handleUpgrade(request: http.IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Open tunnels, for graceful shutdown. */
  readonly openTunnels: number;
  /** Ends every tunnel and pending upgrade (after the drain grace); `shuttingDown`: pending ones are counted as the shutdown's cut. */
  closeAll(shuttingDown: boolean): void;
}

function offersWebSocket(upgrade: string | undefined): boolean {
  return upgrade !== undefined && upgrade.split(',').some((token) => token.trim().toLowerCase() === 'websocket');
}

/**
 * The operation of a request the gateway tunnels as a WebSocket stream, or undefined for any other
 * request carrying an Upgrade header, which is a plain call (served by the API server's
 * shouldUpgradeCallback, as the participant serves it, with that route's own stages): a GET offering
 * `websocket`, to a catalogued channel or to a path under /v2 that no HTTP route claims (a newer
 * participant's stream, as `unknown`). Never a catalogued HTTP route: an Upgrade header must not
 * turn `GET /v2/users` into an `unknown` tunnel past that route's authorization rules.
 */
export function webSocketOperationOf(request: http.IncomingMessage): Operation | undefined {
  if (request.method !== 'GET' || !offersWebSocket(request.headers.upgrade)) return undefined;
  const path = pathOf(request.url ?? '/');
  return matchWebSocketOperation(path) ?? (matchOperation('GET', path) === UNKNOWN_OPERATION ? UNKNOWN_OPERATION : undefined);
}

function writeRefusal(socket: Duplex, error: GatewayError, correlationId: string, trace: TraceContext, traceresponse: string): void {
  const body = JSON.stringify(renderCantonError(error.definition, { ...error.details, correlationId, traceId: trace.traceId }));
  const headers = [
    `HTTP/1.1 ${error.definition.status} ${http.STATUS_CODES[error.definition.status] ?? 'Error'}`,
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
    `x-request-id: ${correlationId}`,
    `traceresponse: ${traceresponse}`,
    ...Object.entries(error.headers).filter(([name]) => name !== 'connection').map(([name, value]) => `${name}: ${value}`), // always closed
  ];
  endRefusal(socket, `${headers.join('\r\n')}\r\n\r\n${body}`);
}

/** How long a refused upgrade's socket may take to hand over its answer before it is destroyed. */
const REFUSAL_FLUSH_MS = 5_000;

/**
 * Ends a refused upgrade's connection. The API server keeps sockets half-open, so `end()` alone
 * left it open until the client closed its side: holding a protection slot (released on close)
 * and keeping shutdown waiting. Destroyed once the answer is flushed, or after REFUSAL_FLUSH_MS.
 */
function endRefusal(socket: Duplex, answer?: string): void {
  const timer = setTimeout(() => socket.destroy(), REFUSAL_FLUSH_MS).unref();
  socket.once('close', () => clearTimeout(timer));
  if (answer === undefined) socket.end(() => socket.destroy());
  else socket.end(answer, () => socket.destroy());
}

/** Headers the gateway frames itself when it passes the participant's answer to an upgrade on. */
const REFRAMED = new Set(['transfer-encoding', 'connection', 'keep-alive']);

/**
 * The participant's answer head, passed on as sent but for its framing when it refused the upgrade:
 * Node has already de-chunked that body, so it goes on close-delimited (`Connection: close`).
 */
function statusLine(response: http.IncomingMessage, refused: boolean, traceresponse: string): string {
  const head = [`HTTP/1.1 ${response.statusCode} ${response.statusMessage ?? ''}`];
  for (let i = 0; i < response.rawHeaders.length; i += 2) {
    const name = response.rawHeaders[i]!;
    if (refused && REFRAMED.has(name.toLowerCase())) continue;
    head.push(`${name}: ${response.rawHeaders[i + 1]}`);
  }
  if (refused) head.push('Connection: close');
  head.push(`traceresponse: ${traceresponse}`);
  return `${head.join('\r\n')}\r\n\r\n`;
}

export function createWebSocketProxy(options: WebSocketProxyOptions): WebSocketProxy {
  const base = new URL(options.upstreamUrl);
  const basePath = base.pathname.replace(/\/+$/, '');
  const transport = base.protocol === 'https:' ? https : http;
  const tls = base.protocol === 'https:' ? upstreamTlsOptions(options.config.upstream.tls) : {};
  const { timeoutMs, operationTimeoutsMs } = options.config.upstream;
  const tunnels = new Set<Duplex>();
  /** Set by closeAll() at shutdown: upgrades still pending then are cut by the gateway. */
  let cuttingOff = false;
  // Upgrades not yet tunnelled or refused (stages or the participant's answer pending), for shutdown.
  const upgrading = new Set<Duplex>();

  function handleUpgrade(request: http.IncomingMessage, socket: Duplex, head: Buffer): void {
    const started = performance.now();
    const correlationId = options.correlationId();
    // Upgrades get no server span: the trace is continued (or started) without one, and the
    // participant is told the gateway's hop in the OTEL_PROPAGATORS formats (telemetry/trace-context.ts).
    const trace = continueTrace(request.headers);
    const traceparent = formatTraceparent(trace);
    let operation: Operation = UNKNOWN_OPERATION;
    socket.on('error', () => socket.destroy());
    upgrading.add(socket);
    socket.once('close', () => upgrading.delete(socket));
    // The API server keeps sockets half-open: a client that sends FIN before the tunnel opens has
    // given up, and nothing would close its socket until the upstream timeout.
    const onGiveUp = () => socket.destroy();
    socket.once('end', onGiveUp);

    // Each upgrade is counted and logged once, as a plain call is (one "request" line): tunnelled
    // (101), refused here or by the participant, or left by its client before either (499).
    let finished = false;
    const finish = (status: number, errorCode: string | null, reason?: string) => {
      if (finished) return;
      finished = true;
      const durationSeconds = (performance.now() - started) / 1000;
      options.onOutcome?.({ operation, status, errorCode, durationSeconds });
      options.log.info({
        reqId: correlationId, traceId: trace.traceId, spanId: trace.spanId,
        trace_id: trace.traceId, span_id: trace.spanId, operation: operation.name, method: 'GET', status,
        errorCode, durationMs: Math.round(durationSeconds * 1e6) / 1e3, ...(reason !== undefined && { reason: scrubSecrets(reason) }),
      }, 'request');
    };
    // Closed by closeAll() (shutdown) before either: the gateway's cut, not the client leaving.
    socket.once('close', () => (cuttingOff ? finish(503, ErrorCodeLabels.shutdownGraceElapsed) : finish(499, 'CLIENT_CLOSED_REQUEST')));
    const refuse = (error: GatewayError) => {
      writeRefusal(socket, error, correlationId, trace, traceparent);
      finish(error.definition.status, error.definition.code, error.reason);
    };

    const framing = framingProblem(request);
    if (framing !== undefined) {
      refuse(framingRefusal(framing));
      return;
    }
    const credential = connectionOptionProblem(request.headers.connection, true);
    if (credential !== undefined) {
      refuse(new GatewayError(Errors.GATEWAY_MALFORMED_REQUEST, { cause: `The request is malformed: ${credential}.` }));
      return;
    }
    const url = request.url ?? '/';
    const problem = requestTargetProblem(url);
    if (problem !== undefined) {
      refuse(new GatewayError(Errors.GATEWAY_INVALID_PATH, { cause: `Invalid request target: ${problem}.` }));
      return;
    }
    const path = pathOf(url);
    // Node versions without shouldUpgradeCallback (before 24.9) hand every Upgrade request here:
    // what is not a stream is refused, never tunnelled.
    const matched = webSocketOperationOf(request);
    if (matched === undefined) {
      refuse(new GatewayError(Errors.GATEWAY_ROUTE_NOT_EXPOSED, { cause: `${request.method ?? ''} ${path.slice(0, 200)} is not a WebSocket stream the gateway serves.` }));
      return;
    }
    operation = matched;

    options.admit(request, operation).then(() => {
      if (socket.destroyed) return;
      // The client's trace headers are replaced by the gateway's hop (its tracestate goes on only
      // with the trace it belongs to).
      const forwarded = forwardedFor(request, options.isTrustedProxy);
      const headers = upstreamRequestHeaders(request.rawHeaders, forwarded, false, traceContextFields());
      // An array of headers makes Node send them as given, without a Host of its own.
      headers.push('Host', base.host, 'Connection', 'Upgrade', 'Upgrade', request.headers.upgrade ?? 'websocket');
      injectTraceContext(trace, headers);
      const upstream = transport.request({
        protocol: base.protocol,
        hostname: base.hostname,
        port: base.port,
        path: basePath + url,
        method: 'GET',
        headers,
        agent: false,
        // Bounds connecting and the participant's answer to the upgrade (idle time on the socket);
        // cleared once the tunnel is open, where a stream may be quiet for long.
        timeout: operationTimeoutsMs[operation.name] ?? timeoutMs,
        ...tls,
      });
      const onClientGone = () => upstream.destroy();
      socket.once('close', onClientGone);
      upstream.once('timeout', () => upstream.destroy(Object.assign(new Error('upgrade timed out'), { code: 'UND_ERR_HEADERS_TIMEOUT' })));
      let answered = false;
      upstream.on('error', (error) => {
        socket.off('close', onClientGone);
        // Once the participant's refusal is under way, a failure cuts it off: no second answer after it.
        if (answered) socket.destroy();
        else if (!socket.destroyed) refuse(upstreamFailure(error));
      });
      upstream.once('response', (response) => {
        // The participant refused the upgrade: its answer goes back whole, still bounded by the timeout.
        answered = true;
        socket.off('close', onClientGone);
        socket.write(statusLine(response, true, traceparent));
        // Its error code, read from the first bytes of its body as for a plain call (the body passes on whole).
        const status = response.statusCode ?? 502;
        const contentType = response.headers['content-type'];
        const capture: Buffer[] = [];
        let captured = 0;
        response.on('data', (chunk: Buffer) => {
          if (captured < ERROR_BODY_CAPTURE_BYTES) capture.push(chunk.subarray(0, ERROR_BODY_CAPTURE_BYTES - captured));
          captured += chunk.length;
        });
        response.once('close', () => finish(status, status >= 400 ? upstreamErrorCode(contentType, Buffer.concat(capture), captured > ERROR_BODY_CAPTURE_BYTES) : null));
        response.on('error', () => socket.destroy());
        response.pipe(socket, { end: false });
        response.once('end', () => endRefusal(socket));
      });
      upstream.once('upgrade', (response, upstreamSocket, upstreamHead) => {
        socket.off('close', onClientGone);
        upstream.setTimeout(0);
        upstreamSocket.setTimeout(0);
        if (socket.destroyed) {
          upstreamSocket.destroy();
          return;
        }
        socket.write(statusLine(response, false, traceparent));
        if (upstreamHead.length > 0) socket.write(upstreamHead);
        if (head.length > 0) upstreamSocket.write(head);
        socket.off('end', onGiveUp); // from here on, a half-close goes through the tunnel
        upgrading.delete(socket);
        tunnels.add(socket);
        const opened = performance.now();
        let closed = false;
        // The stream's own end, on a line of its own under the upgrade's id: how long it lasted and
        // which side closed its connection first (after a WebSocket close handshake that is usually
        // the participant, as RFC 6455 §7.1.1 has the server close first; `gateway` at shutdown).
        // The request line was written when the tunnel opened.
        const close = (closedFirst: 'client' | 'participant') => {
          if (!closed) {
            closed = true;
            options.log.info({ reqId: correlationId, operation: operation.name, durationMs: Math.round(performance.now() - opened), closedFirst: cuttingOff ? 'gateway' : closedFirst }, 'stream ended');
          }
          tunnels.delete(socket);
          socket.destroy();
          upstreamSocket.destroy();
        };
        const byParticipant = () => close('participant');
        const byClient = () => close('client');
        upstreamSocket.on('error', byParticipant).on('close', byParticipant);
        socket.on('close', byClient);
        upstreamSocket.pipe(socket);
        socket.pipe(upstreamSocket);
        finish(101, null);
      });
      upstream.end();
    }, (error: unknown) => {
      if (socket.destroyed) return;
      if (error instanceof GatewayError) refuse(error);
      else {
        options.log.warn({ reqId: correlationId, err: error }, 'websocket upgrade failed');
        refuse(new GatewayError(Errors.GATEWAY_INTERNAL_ERROR, { cause: `An internal error occurred; the gateway log has the details under correlation id ${correlationId}.` }));
      }
    });
  }

  return {
    handleUpgrade,
    get openTunnels() {
      return tunnels.size;
    },
    closeAll(shuttingDown) {
      cuttingOff = shuttingDown;
      for (const socket of [...tunnels, ...upgrading]) socket.destroy();
      tunnels.clear();
      upgrading.clear();
    },
  };
}
