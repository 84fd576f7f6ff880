// The only file that knows the order of the stages. Every exchange, a call or a WebSocket upgrade,
// walks one list: telemetry -> request context (operation, target check) -> authentication ->
// protection (limits) -> authorization. Then a call goes on to its request rules, the version cache
// and the forwarder, an upgrade to the tunnel. Telemetry writes each exchange's one log line.
import { isDeepStrictEqual } from 'node:util';
import proxyAddr from '@fastify/proxy-addr';
import type { Server as TlsServer } from 'node:tls';
import type { FastifyBaseLogger, FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import pino, { type Logger } from 'pino';
import type { Registry } from 'prom-client';
import { createAdminListener } from './server/admin-listener.js';
import { createApiServer } from './server/api-server.js';
import type { AuthFailureReason } from './auth/failure.js';
import { createVersionCache } from './cache/version-cache.js';
import { readServerTls, type LoadedConfig } from './config/load.js';
import { redactedConfig } from './config/effective.js';
import type { GatewayConfig } from './config/schema.js';
import { createContextStage } from './exchange/context-stage.js';
import { createReloadMetrics, reloadGateway, type ReloadOutcome } from './live/reload.js';
import { Errors, GatewayError } from './errors.js';
import type { Stage } from './exchange/exchange.js';
import { Readiness } from './health.js';
import { keySetsFailure } from './auth/key-set.js';
import { BodyBudget } from './body/budget.js';
import { createLiveConfig } from './live/generations.js';
import { IDENTITY_PROVIDER_CHANGES, trustParticipantIdentityProviders } from './live/participant-idps.js';
import { NamedOperations } from './operations.js';
import { limitConnections } from './protection/connections.js';
import { createForwarder } from './proxy/forward.js';
import { UpstreamReplicas } from './proxy/upstream-replicas.js';
import { createWebSocketTunnels } from './proxy/websocket.js';
import { asGatewayError, sendGatewayError } from './exchange/refusal.js';
import { randomRequestId } from './exchange/request-id.js';
import { watchListenerTls } from './server/listener-tls.js';
import { boundUrl } from './server/bound-url.js';
import { gracefulShutdown } from './server/shutdown.js';
import { stageHook } from './exchange/stage-runner.js';
import { createLogger, requestLineWriter } from './telemetry/logging.js';
import { createMetrics, type GatewayMetrics } from './telemetry/metrics.js';
import { createRequestTelemetry } from './telemetry/request-telemetry.js';
import { sampledTraceIdOf } from './telemetry/server-span.js';
import type { Tracing } from './telemetry/tracing.js';
import { createUpgradeHandler } from './server/upgrades.js';

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
  /**
   * Keys whose values were read from files at start (`${file:...}`: config/provenance.ts fromFiles),
   * redacted wherever the configuration is shown (GET /config), as are the keys the schema marks secret.
   */
  readonly secretPaths?: ReadonlySet<string>;
}

/** A configuration a reload applies, with where its values came from when known (their file-read secrets). */
export type ReloadSource = GatewayConfig | LoadedConfig;

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
  /**
   * Re-reads the configuration with `load` (which throws a ConfigError when it is invalid) and swaps
   * in what can change live (live/reload.ts); logged, counted, never thrown. `trigger` names the cause in the log.
   */
  reload(load: () => Promise<ReloadSource> | ReloadSource, trigger?: string): Promise<ReloadOutcome>;
  /** The fingerprint of the configuration the gateway runs now. */
  readonly fingerprint: string;
}

/** A version answer is a few hundred bytes; anything far larger is not cached. */
const VERSION_ANSWER_MAX_BYTES = 1024 * 1024;

/** How long a replaced configuration may still serve a call: the longest upstream bound, or the shutdown grace. */
function retireAfterMs(config: GatewayConfig): number {
  return Math.max(
    config.upstream.timeoutMs,
    config.shutdown.graceMs,
    ...Object.values(config.upstream.operationTimeoutsMs),
  );
}

const API_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

function trustedProxyMatcher(entries: readonly string[]): (address: string) => boolean {
  if (entries.length === 0) return () => false;
  // @fastify/proxy-addr reads IPv4-mapped IPv6 peers (::ffff:10.0.0.1) as the IPv4 address they carry.
  const trust = proxyAddr.compile([...entries]);
  return (address) => trust(address, 0);
}

/** The tracing started in this process (loaded only when tracing is on: the SDK is heavy). */
async function runningTracing(): Promise<Tracing> {
  const { activeTracing } = await import('./telemetry/tracing.js');
  const tracing = activeTracing();
  if (tracing === undefined)
    throw new Error('tracingActive is set but startTracing() has not run in this process (or OTEL_SDK_DISABLED=true)');
  return tracing;
}

export async function buildGateway(config: GatewayConfig, options: GatewayOptions): Promise<Gateway> {
  const metrics = createMetrics(options.registry, config.telemetry.metrics);
  const readiness = new Readiness();
  metrics.watchReadiness(() => readiness.report().checks);
  const isTrustedProxy = trustedProxyMatcher(config.server.trustedProxies);
  const logger = options.logger ?? createLogger(config.log.level);
  const log = (logger === false ? pino({ level: 'silent' }) : logger) as FastifyBaseLogger;

  const tracing = options.tracingActive ? await runningTracing() : undefined;
  const serverSpanPlugin = tracing?.fastifyPlugin;
  const propagateTraceContext = tracing !== undefined && serverSpanPlugin === undefined;
  const writeLine = logger === false ? undefined : requestLineWriter(logger);
  const requestTelemetry = createRequestTelemetry(metrics, {
    propagateTraceContext,
    ...(writeLine !== undefined && { writeLine }),
  });

  // server.tls: HTTPS (and WSS) on the API listener, the files re-read every reloadIntervalMs.
  const listenerTls = config.server.tls.certFile === undefined ? undefined : readServerTls(config.server.tls);
  const api = createApiServer(config, { listenerTls, telemetry: requestTelemetry });

  // The participant: its replicas (upstream.replicas) or the one upstream.url, each probed on its own.
  const replicas = new UpstreamReplicas(config.upstream, options.upstreamUrl, log);
  metrics.watchReplicas(replicas);
  // One budget for every body held in memory (limits is read at start: a reload keeps it).
  const bodyBudget = new BodyBudget(config.limits);
  metrics.watchBodyBuffer(() => bodyBudget.heldBytes);
  const forwarder = createForwarder({
    replicas,
    bodyBudget,
    config,
    replacesTraceContext: serverSpanPlugin !== undefined,
    // Propagated without spans, the participant is told the hop the client's traceresponse names (trace-context.ts).
    ...(propagateTraceContext && { propagateTraceContext }),
    isTrustedProxy,
    onUpstreamTiming: (request, seconds) =>
      metrics.observeUpstream(
        request.operation.name,
        seconds,
        metrics.exemplars ? sampledTraceIdOf(request) : undefined,
      ),
  });
  metrics.watchUpstream(forwarder.load);

  // Telemetry encloses every stage: a call's server span opens before the first stage runs (a
  // refusal there carries its trace id), and every exchange ends in one observation and one log line.
  if (serverSpanPlugin !== undefined) await api.register(serverSpanPlugin);

  // Calls are served through shutdown's drain delay and refused once the listener closes (shutdown.ts).
  const shutdown = gracefulShutdown({
    api,
    readiness,
    settings: config.shutdown,
    tls: listenerTls !== undefined,
    cutOff: () => requestTelemetry.cutOff(),
    close: () => close(),
    ...(tracing !== undefined && { flushTelemetry: () => tracing.shutdown() }),
    log,
  });
  const establishContext = createContextStage({
    routes: config.routes,
    enter: (exchange) => requestTelemetry.enter(exchange),
    shuttingDown: () => readiness.isShuttingDown,
    closing: () => shutdown.closing,
  });

  // Authentication, protection, the policy, CORS and the version cache's TTLs follow the config: built
  // as one generation, swapped whole on a reload (live/generations.ts); each exchange pins the current one.
  const live = createLiveConfig(config, {
    metrics,
    log,
    isTrustedProxy,
    onKeySetFetch: (issuer, result) => metrics.jwksRefresh(issuer, result),
    onAuthFailure: (reason: AuthFailureReason) => metrics.authFailure(reason),
    retireAfterMs: retireAfterMs(config),
    bodyBudget,
  });
  const authenticator = live.current.authenticator;
  for (const warning of authenticator.settings.warnings) log.warn(warning);
  const keySets = () => live.current.authenticator.keySets;
  readiness.add({
    name: 'keys',
    ready: () => live.current.authenticator.ready(),
    detail: () => keySetsFailure(keySets()),
  });
  metrics.watchSignatureChecks(() => live.signatureChecks);
  authenticator.start(); // key sets load in the background; /readyz reports `keys` until they have
  const authenticate = live.authenticate;
  api.addHook('onClose', () => live.close());
  const reloads = createReloadMetrics(metrics.registry, live.current.fingerprint);
  // The participant's IdPs, while auth.participantIdentityProviders.enabled (it follows reloads).
  const participantIdps = trustParticipantIdentityProviders(live, {
    get: (request) => replicas.ownGet(request), // the active replica, upstream.tls, not the clients' pool
    registry: metrics.registry,
    log,
    readiness,
    running: (fingerprint) => reloads.running(fingerprint),
  });

  // The one list. Authentication comes before any body is read and before the version cache, so an
  // unauthenticated caller never costs a body read or sees a cached answer; a token it has not verified
  // yet first spends its address's budget (protection.unauthenticated). Protection follows it, so
  // that limits count principals and an unauthenticated flood never spends a caller's budget, and
  // precedes the policy's body read, so a refused call costs none; a WebSocket stream holds its
  // slot for the tunnel's life. Authorization ends the list: before the version cache, so an
  // unauthorized caller never sees a cached body.
  const stages: readonly Stage[] = [
    requestTelemetry.begin,
    live.pin,
    establishContext,
    authenticate,
    live.protect,
    live.authorize,
  ];

  // Calls: the list runs as one hook (stage-runner.ts), synchronously unless a stage has to wait.
  // CORS, when the call's configuration has it (policy/cors.ts), adds its headers and answers a
  // preflight before authentication: browsers send a preflight without any token.
  api.addHook(
    'onRequest',
    stageHook(stages, {
      before: authenticate,
      answer: (request, reply) => request.generation.cors?.(request, reply) ?? false,
    }),
  );
  // The gateway's own headers on the answers Fastify sends (refusals, CORS preflights, a version
  // answer passed on whole); the answers the gateway writes itself get them from gatewayHeaders
  // (exchange/answer.ts). One the answer already has (the participant's) is kept.
  api.addHook('onSend', (request, reply, payload, done) => {
    if (!reply.hasHeader('x-request-id')) reply.header('x-request-id', request.id);
    if (request.traceresponse !== undefined && !reply.hasHeader('traceresponse'))
      reply.header('traceresponse', request.traceresponse);
    done(null, payload);
  });

  // The GET /v2/version cache (cache/), keyed by upstream so that another participant's answer is
  // never served; its TTLs are the call's configuration's (0: not cached), and a reload that changes
  // them empties it.
  const versionCache = createVersionCache({
    fetchVersion: (request) => forwarder.fetchWhole(request, VERSION_ANSWER_MAX_BYTES),
    count: (result) => metrics.versionCache(result),
  });
  live.onSwap((next, previous) => {
    if (!isDeepStrictEqual(next.versionCache, previous.versionCache)) versionCache.clear();
  });
  const upstreamKey = options.upstreamUrl;
  const answer = (request: FastifyRequest, reply: FastifyReply) => {
    const cached = request.generation.versionCache;
    return cached.ttlSeconds > 0 && request.method === 'GET' && request.operation.name === NamedOperations.getVersion
      ? versionCache.serve(request, reply, upstreamKey, cached)
      : forwarder.forward(request, reply);
  };
  // The request rules run first in the handler, once Fastify has checked the media type: a promise
  // only on the rule-checked routes, whose bodies alone are read (no preHandler hook for every call).
  api.route({
    method: [...API_METHODS],
    url: '/*',
    handler: (request, reply) => {
      // A change of the participant's IdPs arms a refresh only once the participant answered it with
      // success (live/participant-idps.ts): never for a body still arriving or a caller it refused.
      if (IDENTITY_PROVIDER_CHANGES.has(request.operation.name))
        reply.raw.once('close', () =>
          participantIdps.changeAnswered(
            request.operation.name,
            request.url,
            reply.raw.headersSent ? reply.raw.statusCode : 0,
          ),
        );
      const judged = request.generation.enforceRequestRules(request, reply);
      return judged === undefined ? answer(request, reply) : judged.then(() => answer(request, reply));
    },
  });
  api.setErrorHandler((error: FastifyError | GatewayError, request, reply) => {
    const gatewayError = asGatewayError(error, request.id);
    if (gatewayError.definition === Errors.GATEWAY_INTERNAL_ERROR)
      log.error({ reqId: request.id, err: error }, 'unexpected failure');
    else if (gatewayError.reason !== undefined) requestTelemetry.noteRefusal(request, gatewayError.reason); // on the request's one log line
    if (reply.sent || reply.raw.headersSent) {
      reply.raw.destroy();
      return reply;
    }
    return sendGatewayError(request, reply, gatewayError);
  });
  api.setNotFoundHandler((request, reply) => {
    // Only methods outside API_METHODS end here (every path is routed).
    sendGatewayError(
      request,
      reply,
      new GatewayError(Errors.GATEWAY_ROUTE_NOT_EXPOSED, {
        cause: `Method ${request.method} is not served by the gateway.`,
      }),
    );
  });

  // Upgrades: the same list, then the tunnel.
  const tunnels = createWebSocketTunnels({
    replicas,
    config,
    isTrustedProxy,
    onStreamEnded: (operation, endedBy) => metrics.webSocketStreamEnded(operation.name, endedBy),
    log,
  });
  const upgrades = createUpgradeHandler({
    stages,
    tunnels,
    telemetry: requestTelemetry,
    correlationId: randomRequestId,
    log,
  });
  api.server.on('upgrade', upgrades.handleUpgrade);
  // Open client connections are capped as they are accepted, before TLS or any request
  // (protection.connections); a reload's caps apply to the connections accepted after it.
  const connections = limitConnections(api.server, live.current.protection.connectionCaps, {
    isTrustedProxy,
    onRefused: (limit) => metrics.connectionRefused(limit),
  });
  live.onSwap((next) => connections.setCaps(next.protection.connectionCaps));
  metrics.watchConnections(() => connections.open);
  metrics.watchWebSocketStreams(() => tunnels.openTunnels);

  const stopTlsReload =
    listenerTls === undefined
      ? undefined
      : watchListenerTls(api.server as unknown as TlsServer, config.server.tls, listenerTls, log);

  // What GET /config shows besides the running configuration: the secrets read from files are redacted
  // (those of every file applied so far), and the keys of the last valid file that wait for a restart.
  const secretPaths = new Set(options.secretPaths);
  let restartRequired: readonly string[] = [];
  const admin = createAdminListener({
    config,
    readiness,
    registry: metrics.registry,
    upstream: replicas,
    purgeVersionCache: () => versionCache.clear(),
    runningConfig: () => ({
      fingerprint: live.current.fingerprint,
      restartRequired,
      config: redactedConfig(live.current.config, { fromFiles: secretPaths }),
    }),
    log,
  });

  let closed = false;
  async function close(): Promise<void> {
    if (closed) return;
    closed = true;
    stopTlsReload?.();
    participantIdps.close();
    // During a shutdown, what is still open now is the gateway's cut (SHUTDOWN_GRACE_ELAPSED), not
    // clients that left; gateway.close() alone (tests) keeps them as clients that left.
    if (readiness.isShuttingDown) requestTelemetry.cutOff();
    upgrades.closeAll(readiness.isShuttingDown);
    await Promise.allSettled([api.close(), admin.close()]);
    writeLine?.close(); // the last requests' lines
    await forwarder.close();
    await replicas.close();
  }

  return {
    api,
    log,
    admin: admin.server,
    metrics,
    readiness,
    async listen() {
      const adminUrl = await admin.listen();
      const apiUrl = await api.listen({ host: config.server.host, port: config.server.port });
      return {
        api: boundUrl(api.server.address(), new URL(apiUrl).protocol),
        admin: boundUrl(admin.server.server.address(), new URL(adminUrl).protocol),
      };
    },
    shutdown: () => shutdown.run(),
    close,
    reload: async (load, trigger = 'api') => {
      const outcome = await reloadGateway(
        live,
        async () => {
          const source = await load();
          if (!('provenance' in source)) return source;
          for (const path of source.provenance.fromFiles) secretPaths.add(path); // redacted from then on
          return source.config;
        },
        {
          log,
          metrics: reloads,
          trigger,
          setLogLevel: (level) => {
            if (logger !== false) logger.level = level;
          },
        },
      );
      if (outcome.result !== 'invalid') restartRequired = outcome.restartRequired;
      return outcome;
    },
    get fingerprint() {
      return live.current.fingerprint;
    },
  };
}
