// The only file that knows the order of the stages. A request walks:
//   request context (operation, target check) -> authentication -> policy (authorization, rules)
//   -> version cache -> forward -> metrics and the log line.
import type { IncomingMessage } from 'node:http';
import { BlockList, isIP, type Socket } from 'node:net';
import type { Server as TlsServer } from 'node:tls';
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import pino, { type Logger } from 'pino';
import type { Registry } from 'prom-client';
import { createAuthenticator } from './auth/authenticator.js';
import type { AuthFailureReason } from './auth/failure.js';
import { authenticationStage, authenticationUpgradeStage } from './auth/hooks.js';
import type { GatewayConfig } from './config/schema.js';
import { readServerTls } from './config/load.js';
import { Errors, GatewayError, renderCantonError, renderDecodeFailure } from './errors.js';
import { createClientErrorHandler } from './client-errors.js';
import { parseContentType } from './body/content-type.js';
import { listenerSecureOptions, watchListenerTls } from './server-tls.js';
import { Readiness } from './health.js';
import { randomRequestId } from './request-id.js';
import { createVersionCache } from './cache/version-cache.js';
import { NamedOperations, UNKNOWN_OPERATION, type Operation } from './operations.js';
import { createProtectionStage } from './protection/stage.js';
import { corsOptions, registerCors } from './policy/cors.js';
import { createPolicyStage } from './policy/stage.js';
import { createForwarder } from './proxy/forward.js';
import { createWebSocketProxy, webSocketOperationOf } from './proxy/websocket.js';
import { stageHook, type Stage } from './stage-runner.js';
import { connectionOptionProblem, contentTypeProblem, framingProblem, framingRefusal, resolveOperation, traceIdOf, type Principal } from './request-context.js';
import { createLogger, requestLineWriter } from './telemetry/logging.js';
import { createMetrics, type GatewayMetrics } from './telemetry/metrics.js';
import { createRequestTelemetry } from './telemetry/request-telemetry.js';
import { sampledTraceIdOf } from './telemetry/server-span.js';
import type { Tracing } from './telemetry/tracing.js';

/** What an upgrade carries through the stages (the HTTP path uses request decorators). */
export interface UpgradeContext {
  readonly request: IncomingMessage;
  readonly operation: Operation;
  principal: Principal | null;
}

/** A stage's check of a WebSocket upgrade: throws a GatewayError to refuse it. */
export type UpgradeStage = (context: UpgradeContext) => Promise<void>;

export interface GatewayOptions {
  /** The participant's base URL, already resolved (main.ts starts the sandbox for "sandbox"). */
  readonly upstreamUrl: string;
  /** A fresh Registry per app (prom-client's global one throws on a second app). */
  readonly registry?: Registry;
  /** false silences logs (tests); a pino logger from telemetry/logging (createLogger); default: createLogger(config.log.level). */
  readonly logger?: false | Logger;
  /**
   * True when startTracing() (telemetry/tracing) runs in this process. When it exports, the server
   * span plugin is registered and the forwarder drops the client's trace headers because the undici
   * instrumentation injects the gateway's own; when not, the telemetry stage propagates the trace
   * context by hand and the forwarder sends its traceparent instead of the client's.
   */
  readonly tracingActive?: boolean;
}

export interface Gateway {
  readonly api: FastifyInstance;
  /** The gateway's logger (silent when GatewayOptions.logger is false); the API's Fastify instance has none of its own. */
  readonly log: FastifyBaseLogger;
  readonly admin: FastifyInstance;
  readonly metrics: GatewayMetrics;
  readonly readiness: Readiness;
  /** Listen on the configured addresses; returns the bound URLs. */
  listen(): Promise<{ api: string; admin: string }>;
  /** Turn unready, stop accepting, let in-flight calls finish within the grace, close everything. */
  shutdown(): Promise<void>;
  /** Close at once (tests). */
  close(): Promise<void>;
}

/** A version answer is a few hundred bytes; anything far larger is not cached. */
const VERSION_ANSWER_MAX_BYTES = 1024 * 1024;

const API_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

function trustedProxyMatcher(entries: readonly string[]): (address: string) => boolean {
  if (entries.length === 0) return () => false;
  const list = new BlockList();
  for (const entry of entries) {
    const [address, prefix] = entry.split('/');
    const family = isIP(address ?? '') === 6 ? 'ipv6' : 'ipv4';
    if (prefix === undefined) list.addAddress(address!, family);
    else list.addSubnet(address!, Number(prefix), family);
  }
  return (address) => {
    const plain = address.startsWith('::ffff:') ? address.slice(7) : address;
    return list.check(plain, isIP(plain) === 6 ? 'ipv6' : 'ipv4');
  };
}

/** Maps Fastify's own errors (bad URL, media type, parser) into the catalogue. */
function asGatewayError(error: FastifyError | Error, correlationId: string): GatewayError {
  if (error instanceof GatewayError) return error;
  const status = (error as FastifyError).statusCode;
  if (status === 413) return new GatewayError(Errors.GATEWAY_REQUEST_TOO_LARGE, { cause: 'The request body is too large.' });
  if (status === 415) return new GatewayError(Errors.GATEWAY_UNSUPPORTED_MEDIA_TYPE, { cause: 'The request content type is not supported here.' });
  if (status !== undefined && status >= 400 && status < 500) {
    return new GatewayError(Errors.GATEWAY_MALFORMED_REQUEST, { cause: `The request is malformed (${(error as FastifyError).code ?? 'bad request'}).` });
  }
  return new GatewayError(Errors.GATEWAY_INTERNAL_ERROR, { cause: `An internal error occurred; the gateway log has the details under correlation id ${correlationId}.` }, { cause: error });
}

/** The tracing started in this process (loaded only when tracing is on: the SDK is heavy). */
async function runningTracing(): Promise<Tracing> {
  const { activeTracing } = await import('./telemetry/tracing.js');
  const tracing = activeTracing();
  if (tracing === undefined) throw new Error('tracingActive is set but startTracing() has not run in this process (or OTEL_SDK_DISABLED=true)');
  return tracing;
}

export function sendGatewayError(request: FastifyRequest, reply: FastifyReply, error: GatewayError): FastifyReply {
  request.errorCode = error.definition.code;
  // Refused before its body was read whole (a 401 for an upload, say): Node would read the rest as
  // this connection's next bytes, and a body that then fails to parse drew a second, stray answer.
  if (reply.server.draining || !request.raw.complete) reply.header('connection', 'close');
  if (error.definition.plainText) {
    return reply.code(error.definition.status).headers(error.headers).type('text/plain; charset=UTF-8').send(renderDecodeFailure(error.details));
  }
  const body = renderCantonError(error.definition, { ...error.details, correlationId: request.id, traceId: traceIdOf(request) });
  return reply.code(error.definition.status).headers(error.headers).type('application/json').send(JSON.stringify(body));
}

export async function buildGateway(config: GatewayConfig, options: GatewayOptions): Promise<Gateway> {
  const metrics = createMetrics(options.registry, config.telemetry.metrics);
  const readiness = new Readiness();
  const isTrustedProxy = trustedProxyMatcher(config.server.trustedProxies);
  const logger = options.logger ?? createLogger(config.log.level);
  const log = (logger === false ? pino({ level: 'silent' }) : logger) as FastifyBaseLogger;

  // Node's own server options, for the HTTP listener or, with server.tls, the HTTPS one.
  const serverOptions = {
    maxHeaderSize: config.server.maxHeaderBytes,
    headersTimeout: config.server.headersTimeoutMs,
    // Node checks header and request timeouts every connectionsCheckingInterval (30 s by default):
    // check every second so a slow-loris client is cut close to its bound.
    connectionsCheckingInterval: 1_000,
    // A request without Content-Length or Transfer-Encoding has no body (RFC 9112 §6.3): Node
    // then hands it over already ended, with no 'data', 'end' or 'close' events to run (Node
    // 24.12+; older versions ignore the option). 2-6% less CPU per proxied or cached GET, paired.
    // Nothing here listens for a request's own events on such a call (a client that leaves is
    // seen on the response's close), and such a request is bodiless to the gateway's own body
    // tests too (forward.ts hasBody, body/read.ts readRequestBody).
    optimizeEmptyRequests: true,
    // A request without Host gets the gateway's coded 400 (request context stage), not Node's bare one.
    requireHostHeader: false,
    // Only a WebSocket stream becomes an upgrade (websocket.ts webSocketOperationOf); any other
    // request with an Upgrade header is served as the plain call it is, with its route's stages,
    // as the participant serves it (Node 24.9+; older versions refuse those in handleUpgrade).
    shouldUpgradeCallback: (request: IncomingMessage) => webSocketOperationOf(request) !== undefined,
  };
  // server.tls: HTTPS (and WSS) on the API listener, the files re-read every reloadIntervalMs.
  const listenerTls = config.server.tls.certFile === undefined ? undefined : readServerTls(config.server.tls);

  const api = Fastify({
    // No Fastify logger on the API: with one, Fastify makes (and validates) a child logger and adds
    // two response listeners for every call (2.5% of a proxied call's CPU, measured). The gateway
    // logs through `log`: one line per request (request-telemetry) and its own events.
    logger: false,
    genReqId: randomRequestId,
    requestIdHeader: false,
    return503OnClosing: false, // shutdown answers in Canton's shape (request context stage)
    forceCloseConnections: 'idle',
    keepAliveTimeout: config.server.keepAliveTimeoutMs,
    requestTimeout: config.server.requestTimeoutMs,
    // A client that never finishes the TLS handshake is no HTTP connection yet: headersTimeoutMs bounds it too (Node's default: 120 s).
    ...(listenerTls === undefined ? { http: serverOptions } : { https: { ...serverOptions, handshakeTimeout: config.server.headersTimeoutMs, ...listenerSecureOptions(listenerTls) } }),
    bodyLimit: config.limits.bodyBytes,
    routerOptions: { ignoreTrailingSlash: false, ignoreDuplicateSlashes: false, maxParamLength: 4096 },
    // Malformed HTTP never reaches a route: counted as operation unknown, method _OTHER (the parser
    // gave up before a method could be trusted), with a request id and a request line of its own.
    clientErrorHandler: createClientErrorHandler(({ definition, requestId, reason }) => {
      metrics.observeRequest(UNKNOWN_OPERATION.name, '_OTHER', definition.status, definition.code, 0);
      log.info({ reqId: requestId, operation: UNKNOWN_OPERATION.name, method: '_OTHER', status: definition.status, errorCode: definition.code, durationMs: 0, traceId: null, spanId: null, reason }, 'request');
    }, randomRequestId),
    // A request target Fastify cannot decode (`/v2/%zz`) fails before any hook: answered in Canton's
    // shape like every other refusal, and counted (no stage runs for it).
    // Faulty framing is judged first, as in the request context stage: its connection is closed and
    // nothing pipelined behind it is served, whatever the target.
    frameworkErrors: (error, request, reply) => {
      const framing = framingProblem(request.raw);
      const definition = error.code === 'FST_ERR_BAD_URL' ? Errors.GATEWAY_INVALID_PATH : Errors.GATEWAY_MALFORMED_REQUEST;
      const cause = definition === Errors.GATEWAY_INVALID_PATH ? 'Invalid request target: a percent-encoding that does not decode.' : `The request is malformed (${error.code}).`;
      const refusal = framing !== undefined ? framingRefusal(framing) : new GatewayError(definition, { cause });
      metrics.observeRequest(UNKNOWN_OPERATION.name, request.method, refusal.definition.status, refusal.definition.code, 0);
      log.info({ reqId: request.id, operation: UNKNOWN_OPERATION.name, method: request.method, status: refusal.definition.status, errorCode: refusal.definition.code, durationMs: 0, traceId: null, spanId: null, reason: framing ?? error.code }, 'request');
      reply.header('x-request-id', request.id); // no onSend hook runs for it either
      sendGatewayError(request, reply, refusal);
    },
  });

  const tracing = options.tracingActive ? await runningTracing() : undefined;
  const serverSpanPlugin = tracing?.fastifyPlugin;
  const propagateTraceContext = tracing !== undefined && serverSpanPlugin === undefined;

  // With CORS configured, its plugin sets headers on the reply that every answer must carry.
  const corsConfigured = corsOptions(config.cors) !== undefined;
  const forwarder = createForwarder({
    upstreamUrl: options.upstreamUrl,
    config,
    replyHeaders: corsConfigured,
    replacesTraceContext: serverSpanPlugin !== undefined,
    // Propagated by hand, the participant's traceparent is the client's traceresponse (trace-context.ts).
    ...(propagateTraceContext && { traceparentOf: (request: FastifyRequest) => request.traceresponse }),
    isTrustedProxy,
    onUpstreamTiming: (request, seconds) => metrics.observeUpstream(request.operation.name, seconds, metrics.exemplars ? sampledTraceIdOf(request) : undefined),
  });
  metrics.watchUpstream(forwarder.load);

  // Telemetry encloses every stage: the server span opens before the first stage runs (a refusal
  // there carries its trace id), and every request ends in one observation, one span, one log line.
  if (serverSpanPlugin !== undefined) await api.register(serverSpanPlugin);
  const writeLine = logger === false ? undefined : requestLineWriter(logger);
  const requestTelemetry = createRequestTelemetry(metrics, { propagateTraceContext, ...(writeLine !== undefined && { writeLine }) });

  // Bodies are never parsed by Fastify: they stream upstream untouched, and only the rule-checked
  // routes read theirs (policy stage).
  api.decorateRequest('operation', null as unknown as typeof UNKNOWN_OPERATION); // set by the request context stage
  api.decorateRequest('principal', null);
  api.decorateRequest('errorCode', null);
  api.decorateRequest('rawBody', undefined);
  api.decorateRequest('traceContext', undefined); // set by the telemetry stage when propagating by hand
  api.decorateRequest('traceresponse', undefined); // set by the telemetry stage when tracing runs
  api.decorate('draining', false); // set when shutdown begins (answers close their connections)
  api.removeAllContentTypeParsers();
  api.addContentTypeParser('*', (_request, _payload, done) => done(null));

  // Set once shutdown's drain delay is over and the listener closes: requests that still arrive on
  // open connections are refused. During the delay (readiness already 503, while load balancers
  // take the gateway out of rotation) they are served, each answer closing its connection.
  let refusingRequests = false;

  // Stage 0: request context: the operation from the route catalogue and a clean target.
  const requestContext: Stage = (request, reply) => {
    const framing = framingProblem(request.raw);
    if (framing !== undefined) throw framingRefusal(framing);
    const headProblem = connectionOptionProblem(request.headers.connection, false)
      ?? contentTypeProblem(request.raw.rawHeaders);
    if (headProblem !== undefined) {
      throw new GatewayError(Errors.GATEWAY_MALFORMED_REQUEST, { cause: `The request is malformed: ${headProblem}.` });
    }
    // Fastify answers 415 to a Content-Type it cannot parse, before any handler; pekko-http keeps such a
    // line as a raw header and reads the body as untyped. Fastify is shown the type pekko then assumes;
    // the line itself is forwarded as sent (the forwarder sends the raw header lines).
    const contentType = request.headers['content-type'];
    if (contentType !== undefined && parseContentType(contentType) === undefined) {
      request.headers = { 'content-type': 'application/octet-stream' };
    }
    request.operation = resolveOperation(request.method, request.url, config.routes);
    requestTelemetry.enter(request);
    if (refusingRequests) {
      reply.header('connection', 'close');
      throw new GatewayError(Errors.GATEWAY_UPSTREAM_UNAVAILABLE, { cause: 'The gateway is shutting down.' });
    }
  };
  // WebSocket upgrades pass the same stages, in the same order, before the tunnel opens.
  const upgradeStages: UpgradeStage[] = [];

  // Stage 1: authentication (auth/) — before any body is read and before the version cache, so an
  // unauthenticated caller never costs a body read or sees a cached answer.
  const authenticator = createAuthenticator(config, {
    onKeySetFetch: (issuer, result) => metrics.jwksRefresh(issuer, result),
    log,
  });
  for (const warning of authenticator.settings.warnings) log.warn(warning);
  const onAuthFailure = (reason: AuthFailureReason) => metrics.authFailure(reason);
  upgradeStages.push(authenticationUpgradeStage(authenticator, onAuthFailure));
  readiness.add({ name: 'keys', ready: () => authenticator.ready() });
  metrics.watchSignatureChecks(() => authenticator.signatureChecks);
  authenticator.start(); // key sets load in the background; /readyz reports `keys` until they have

  // Stage 1b: traffic protection (protection/) — after authentication, so limits count principals and
  // an unauthenticated flood never spends a caller's budget; before policy reads a body, so a refused
  // call costs no body read. A WebSocket stream holds its slot for the life of the tunnel.
  const protectionStage = createProtectionStage(config, { metrics, log, isTrustedProxy });
  upgradeStages.push(protectionStage.upgradeStage);
  api.addHook('onClose', () => protectionStage.close());

  // Stage 2: policy (policy/) — per-operation authorization (before the version cache: an
  // unauthorized caller never sees a cached body), then the request rules once the route is known.
  const policy = createPolicyStage(config);
  upgradeStages.push(policy.authorizeUpgrade);
  // The stages run as few hooks (stage-runner.ts): synchronously unless one has to wait. CORS
  // (policy/cors.ts, @fastify/cors's own hook, when configured) runs between the request context and
  // authentication: browsers send a preflight without any token.
  const contextStages: Stage[] = [requestTelemetry.begin, requestContext];
  const guardStages: Stage[] = [authenticationStage(authenticator, onAuthFailure), protectionStage.stage, policy.authorize];
  if (!corsConfigured) {
    api.addHook('onRequest', stageHook([...contextStages, ...guardStages]));
  } else {
    api.addHook('onRequest', stageHook(contextStages));
    await registerCors(api, config.cors);
    api.addHook('onRequest', stageHook(guardStages));
  }
  // The gateway's own headers on the answers Fastify sends (refusals, CORS preflights, a version
  // answer passed on whole); the answers the gateway writes itself get them from gatewayHeaders
  // (proxy/answer.ts). One the answer already has (the participant's) is kept.
  api.addHook('onSend', (request, reply, payload, done) => {
    if (!reply.hasHeader('x-request-id')) reply.header('x-request-id', request.id);
    if (request.traceresponse !== undefined && !reply.hasHeader('traceresponse')) reply.header('traceresponse', request.traceresponse);
    done(null, payload);
  });

  // Stage 3: the GET /v2/version cache (cache/), keyed by upstream so that another participant's
  // answer is never served.
  const versionCache = config.versionCache.ttlSeconds > 0
    ? createVersionCache({
      ttlSeconds: config.versionCache.ttlSeconds,
      replyHeaders: corsConfigured,
      staleIfErrorSeconds: config.versionCache.staleIfErrorSeconds,
      fetchVersion: (request) => forwarder.fetchWhole(request, VERSION_ANSWER_MAX_BYTES),
      count: (result) => metrics.versionCache(result),
    })
    : undefined;
  const upstreamKey = options.upstreamUrl;

  const answer = (request: FastifyRequest, reply: FastifyReply) => (versionCache !== undefined && request.method === 'GET' && request.operation.name === NamedOperations.getVersion
    ? versionCache.serve(request, reply, upstreamKey)
    : forwarder.forward(request, reply));
  // The request rules run first in the handler, once Fastify has checked the media type: a promise
  // only on the rule-checked routes, whose bodies alone are read (no preHandler hook for every call).
  api.route({
    method: [...API_METHODS],
    url: '/*',
    handler: (request, reply) => {
      const judged = policy.enforceRequestRules(request, reply);
      return judged === undefined ? answer(request, reply) : judged.then(() => answer(request, reply));
    },
  });

  api.setErrorHandler((error: FastifyError | GatewayError, request, reply) => {
    const gatewayError = asGatewayError(error, request.id);
    if (gatewayError.definition === Errors.GATEWAY_INTERNAL_ERROR) log.error({ reqId: request.id, err: error }, 'unexpected failure');
    else if (gatewayError.reason !== undefined) requestTelemetry.noteRefusal(request, gatewayError.reason); // on the request's one log line
    if (reply.sent || reply.raw.headersSent) {
      reply.raw.destroy();
      return reply;
    }
    return sendGatewayError(request, reply, gatewayError);
  });

  api.setNotFoundHandler((request, reply) => {
    // Only methods outside API_METHODS end here (every path is routed).
    sendGatewayError(request, reply, new GatewayError(Errors.GATEWAY_ROUTE_NOT_EXPOSED, { cause: `Method ${request.method} is not served by the gateway.` }));
  });

  const websockets = createWebSocketProxy({
    upstreamUrl: options.upstreamUrl,
    config,
    isTrustedProxy,
    admit: async (request, operation) => {
      // A stream opened once shutdown has begun would be cut when the grace ends (and hold the
      // shutdown that long): refused from the signal on, so the client reconnects elsewhere.
      if (readiness.isShuttingDown) throw new GatewayError(Errors.GATEWAY_UPSTREAM_UNAVAILABLE, { cause: 'The gateway is shutting down.' });
      const context: UpgradeContext = { request, operation, principal: null };
      for (const stage of upgradeStages) await stage(context);
    },
    correlationId: randomRequestId,
    onOutcome: (outcome) => metrics.observeRequest(outcome.operation.name, 'GET', outcome.status, outcome.errorCode, outcome.durationSeconds),
    log,
  });
  api.server.on('upgrade', websockets.handleUpgrade);
  metrics.watchWebSocketStreams(() => websockets.openTunnels);
  const stopTlsReload = listenerTls === undefined ? undefined : watchListenerTls(api.server as unknown as TlsServer, config.server.tls, listenerTls, log);
  // With TLS, a socket still in its handshake is not yet one of the HTTP server's connections, which
  // closeAllConnections() ends when the grace is over: the raw sockets are tracked here too (per
  // connection, not per call), and ended with them.
  const rawSockets = new Set<Socket>();
  if (listenerTls !== undefined) {
    api.server.on('connection', (socket: Socket) => {
      rawSockets.add(socket);
      socket.once('close', () => rawSockets.delete(socket));
    });
  }

  // Admin listener: probes and metrics, never on the API port.
  const admin = Fastify({ logger: false });
  let upstreamAnswers = false;
  readiness.add({ name: 'upstream', ready: () => upstreamAnswers });
  // One probe at a time: an interval tick or a /readyz while one runs waits for it.
  let probing: Promise<void> | undefined;
  const probeUpstream = () => probing ??= forwarder.probe(Math.min(2_000, config.upstream.readinessIntervalMs)).then((answers) => {
    upstreamAnswers = answers;
  }).finally(() => {
    probing = undefined;
  });
  const probeTimer = setInterval(() => void probeUpstream(), config.upstream.readinessIntervalMs);
  probeTimer.unref();

  admin.get('/livez', async () => ({ status: 'ok' }));
  admin.get('/readyz', async (_request, reply) => {
    const report = readiness.report();
    // Between two probes, a failing upstream is re-checked on demand so the answer is current.
    if (!report.ready && !readiness.isShuttingDown && report.checks.upstream === 'failing') {
      await probeUpstream();
      return reply.code(readiness.report().ready ? 200 : 503).send(readiness.report());
    }
    return reply.code(report.ready ? 200 : 503).send(report);
  });
  admin.post('/cache/version/purge', async (_request, reply) => {
    versionCache?.clear();
    return reply.code(204).send();
  });
  admin.get('/metrics', async (_request, reply) => {
    reply.type(metrics.registry.contentType);
    return metrics.registry.metrics();
  });

  let closed = false;
  async function close(): Promise<void> {
    if (closed) return;
    closed = true;
    clearInterval(probeTimer);
    stopTlsReload?.();
    authenticator.close();
    websockets.closeAll(readiness.isShuttingDown);
    await Promise.allSettled([api.close(), admin.close()]);
    writeLine?.close(); // the last requests' lines
    await forwarder.close();
  }

  return {
    api,
    log,
    admin,
    metrics,
    readiness,
    async listen() {
      void probeUpstream(); // readiness follows; /readyz re-probes on demand while failing
      const adminUrl = await admin.listen({ host: config.admin.host, port: config.admin.port });
      const apiUrl = await api.listen({ host: config.server.host, port: config.server.port });
      return { api: apiUrl, admin: adminUrl };
    },
    async shutdown() {
      readiness.beginShutdown();
      api.draining = true;
      if (config.shutdown.drainDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, config.shutdown.drainDelayMs));
      refusingRequests = true;
      const grace = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), config.shutdown.graceMs).unref());
      // api.close() stops accepting, closes idle keep-alive connections and waits for in-flight calls;
      // a connection whose call finishes later is idle then, and closed on the next sweep.
      const sweep = setInterval(() => api.server.closeIdleConnections(), 100);
      const outcome = await Promise.race([api.close().then(() => 'drained' as const), grace]);
      clearInterval(sweep);
      if (outcome === 'timeout') {
        log.warn({ graceMs: config.shutdown.graceMs }, 'shutdown grace elapsed; closing remaining connections');
        requestTelemetry.cutOff(); // counted as SHUTDOWN_GRACE_ELAPSED, not as clients that left
        api.server.closeAllConnections();
        for (const socket of rawSockets) socket.destroy();
      }
      await close();
    },
    close,
  };
}
