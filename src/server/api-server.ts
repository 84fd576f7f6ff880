// The API listener's Fastify instance: Node's server options, a call's exchange fields as request
// decorators, and the answers to requests that never reach a stage (malformed HTTP, a target Fastify
// cannot decode), each still counted and logged as a request of its own. The stages, the route and
// the hooks are app.ts's.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import Fastify, { type FastifyInstance } from 'fastify';
import { createClientErrorHandler, rawRefusal } from './client-errors.js';
import type { LimitsConfig, ServerConfig } from '../config/schema.js';
import { Errors, GatewayError } from '../errors.js';
import { deferContinue } from './expect-continue.js';
import { sendGatewayError } from '../exchange/refusal.js';
import { normalizedPathPrefix, stripped, stripPathPrefix, stripUpgradeTargets } from '../exchange/path-prefix.js';
import { framingProblem, framingRefusal, webSocketOperationOf } from '../exchange/request-context.js';
import { randomRequestId } from '../exchange/request-id.js';
import { listenerSecureOptions, type ListenerTlsFiles } from './listener-tls.js';
import { dispatchInTurn, type PipelineQueues } from './pipelining.js';
import type { RequestTelemetry } from '../telemetry/request-telemetry.js';

export interface ApiServerOptions {
  /** server.tls's files, read: HTTPS and WSS on the API listener. */
  readonly listenerTls: ListenerTlsFiles | undefined;
  readonly telemetry: Pick<RequestTelemetry, 'unroutedRefusal'>;
  /** Given what pipelined requests wait now, for the metrics (read at scrape). */
  readonly watchPipelining?: (queues: PipelineQueues) => void;
}

/**
 * Requests Node would answer (or drop) itself, bare: another expectation than 100-continue (a bare
 * 417) walks the stages like any call, refused by the request context stage in Canton's shape;
 * CONNECT (its socket destroyed unanswered) gets the 404 every method the gateway does not serve gets.
 */
function refuseWhatNodeAnswers(api: FastifyInstance, telemetry: ApiServerOptions['telemetry']): void {
  api.server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) =>
    api.server.emit('request', request, response),
  );
  api.server.on('connect', (request: IncomingMessage, socket: Duplex) => {
    const id = randomRequestId();
    const definition = Errors.GATEWAY_ROUTE_NOT_EXPOSED;
    socket.on('error', () => undefined);
    socket.end(rawRefusal(definition, 'Method CONNECT is not served by the gateway.', id), () => socket.destroy());
    telemetry.unroutedRefusal({
      id,
      method: 'CONNECT',
      status: definition.status,
      errorCode: definition.code,
      reason: 'CONNECT',
    });
  });
}

export function createApiServer(
  server: ServerConfig,
  limits: LimitsConfig,
  options: ApiServerOptions,
): FastifyInstance {
  const { listenerTls, telemetry } = options;
  // server.pathPrefix: stripped from every target before it is routed, read or forwarded (exchange/path-prefix.ts).
  const pathPrefix = normalizedPathPrefix(server.pathPrefix);
  // Node's own server options, for the HTTP listener or, with server.tls, the HTTPS one.
  const serverOptions = {
    maxHeaderSize: server.maxHeaderBytes,
    headersTimeout: server.headersTimeoutMs,
    // Node checks header and request timeouts every connectionsCheckingInterval (30 s by default):
    // check every second so a slow-loris client is cut close to its bound.
    connectionsCheckingInterval: 1_000,
    // A request without Content-Length or Transfer-Encoding has no body (RFC 9112 §6.3): Node
    // then hands it over already ended, with no 'data', 'end' or 'close' events to run (Node
    // 24.12+; older versions ignore the option); measured in docs/performance.md.
    // Nothing here listens for a request's own events on such a call (a client that leaves is
    // seen on the response's close), and such a request is bodiless to the gateway's own body
    // tests too (body/read.ts declaresBody, readRequestBody).
    optimizeEmptyRequests: true,
    // A request without Host gets the gateway's coded 400 (request context stage), not Node's bare one.
    requireHostHeader: false,
    // Only a WebSocket stream becomes an upgrade (request-context.ts webSocketOperationOf); any
    // other request with an Upgrade header is served as the plain call it is, with its route's
    // stages, as the participant serves it (Node 24.9+; older versions refuse those in handleUpgrade).
    shouldUpgradeCallback: (request: IncomingMessage) =>
      webSocketOperationOf(stripped(request, pathPrefix)) !== undefined,
  };

  const api = Fastify({
    // No Fastify logger on the API: with one, Fastify makes (and validates) a child logger and adds
    // two response listeners for every call (docs/performance.md). The gateway
    // logs through its own logger: one line per request (request-telemetry) and its own events.
    logger: false,
    genReqId: randomRequestId,
    requestIdHeader: false,
    return503OnClosing: false, // shutdown answers in Canton's shape (request context stage)
    forceCloseConnections: 'idle',
    keepAliveTimeout: server.keepAliveTimeoutMs,
    requestTimeout: server.requestTimeoutMs,
    // A client that never finishes the TLS handshake is no HTTP connection yet: headersTimeoutMs bounds it
    // too (Node's default: 120 s).
    ...(listenerTls === undefined
      ? { http: serverOptions }
      : {
          https: {
            ...serverOptions,
            handshakeTimeout: server.headersTimeoutMs,
            ...listenerSecureOptions(listenerTls, server.tls),
          },
        }),
    bodyLimit: limits.bodyBytes,
    ...(pathPrefix !== undefined && { rewriteUrl: (request: IncomingMessage) => stripPathPrefix(request, pathPrefix) }),
    routerOptions: { ignoreTrailingSlash: false, ignoreDuplicateSlashes: false, maxParamLength: 4096 },
    // Malformed HTTP never reaches a route: counted as operation unknown, method _OTHER (the parser
    // gave up before a method could be trusted), with a request id and a request line of its own.
    clientErrorHandler: createClientErrorHandler(({ definition, requestId, reason }) => {
      telemetry.unroutedRefusal({
        id: requestId,
        method: '_OTHER',
        status: definition.status,
        errorCode: definition.code,
        reason,
      });
    }, randomRequestId),
    // A request target Fastify cannot decode (`/v2/%zz`) fails before any hook: answered in Canton's
    // shape like every other refusal, and counted (no stage runs for it).
    // Faulty framing is judged first, as in the request context stage: its connection is closed and
    // nothing pipelined behind it is served, whatever the target.
    frameworkErrors: (error, request, reply) => {
      const framing = framingProblem(request.raw);
      const definition =
        error.code === 'FST_ERR_BAD_URL' ? Errors.GATEWAY_INVALID_PATH : Errors.GATEWAY_MALFORMED_REQUEST;
      const cause =
        definition === Errors.GATEWAY_INVALID_PATH
          ? 'Invalid request target: a percent-encoding that does not decode.'
          : `The request is malformed (${error.code}).`;
      const refusal = framing !== undefined ? framingRefusal(framing) : new GatewayError(definition, { cause });
      telemetry.unroutedRefusal({
        id: request.id,
        method: request.method,
        status: refusal.definition.status,
        errorCode: refusal.definition.code,
        reason: framing ?? error.code,
      });
      reply.header('x-request-id', request.id); // no onSend hook runs for it either
      sendGatewayError(request, reply, refusal);
    },
  });

  if (pathPrefix !== undefined) stripUpgradeTargets(api.server, pathPrefix);
  // A pipelined request walks its stages only when its answer's turn comes, and never behind an
  // answer that closed the connection (after Fastify's own listener is in place); what waits is bounded.
  const queues = dispatchInTurn(api.server, limits.pipelining);
  options.watchPipelining?.(queues);
  // Expect: 100-continue is answered once a stage reads the body, not before the stages judged the call.
  deferContinue(api.server);
  refuseWhatNodeAnswers(api, telemetry);

  decorateExchangeFields(api);
  api.decorate('draining', false); // set when shutdown begins (answers close their connections)
  // Bodies are never parsed by Fastify: they stream upstream untouched, and only the rule-checked
  // routes read theirs (policy stage).
  api.removeAllContentTypeParsers();
  api.addContentTypeParser('*', (_request, _payload, done) => done(null));
  return api;
}

/** A call's exchange is its request (exchange.ts): these decorators are its fields. */
function decorateExchangeFields(api: FastifyInstance): void {
  api.decorateRequest('kind', 'call');
  api.decorateRequest('lifeline', null as never); // set by the stage hook
  api.decorateRequest('generation', null as never); // pinned by the first stage (live/generations.ts)
  api.decorateRequest('operation', null as never); // set by the request context stage
  api.decorateRequest('principal', null);
  api.decorateRequest('errorCode', null);
  api.decorateRequest('refusalReason', undefined); // set with errorCode when a stage refuses the call
  api.decorateRequest('rawBody', undefined);
  api.decorateRequest('parsedBody', undefined);
  api.decorateRequest('traceContext', undefined); // set by the telemetry stage when propagating by hand
  api.decorateRequest('traceresponse', undefined); // set by the telemetry stage when tracing runs
  api.decorateRequest('replyHeaders', false); // set when CORS puts its headers on the reply
  api.decorateRequest('answerContentLength', undefined); // set when the gateway writes an answer head itself
  api.decorateRequest('ledgerDecision', undefined); // set by the ledger policy for a caller a policy names
}
