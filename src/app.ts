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
import { createAdminListener, type AdminListener } from './server/admin-listener.js';
import { createApiServer } from './server/api-server.js';
import type { AuthFailureReason } from './auth/failure.js';
import { createVersionCache, type VersionCache } from './cache/version-cache.js';
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
import { createLiveConfig, type LiveConfig } from './live/generations.js';
import {
  IDENTITY_PROVIDER_CHANGES,
  trustParticipantIdentityProviders,
  type ParticipantTrust,
} from './live/participant-idps.js';
import { NamedOperations } from './operations.js';
import { limitConnections } from './protection/connections.js';
import { createForwarder, type Forwarder } from './proxy/forward.js';
import { UpstreamReplicas } from './proxy/upstream-replicas.js';
import { createWebSocketTunnels } from './proxy/websocket.js';
import { asGatewayError, sendGatewayError } from './exchange/refusal.js';
import { randomRequestId } from './exchange/request-id.js';
import { onResponseClose } from './exchange/response-close.js';
import { watchListenerTls } from './server/listener-tls.js';
import { boundUrl } from './server/bound-url.js';
import { gracefulShutdown } from './server/shutdown.js';
import { stageHook } from './exchange/stage-runner.js';
import { createLogger, requestLineWriter, type RequestLineWriter } from './telemetry/logging.js';
import { createAuditTrail, type AuditTrail } from './audit/audit-trail.js';
import { createAccessLog } from './telemetry/access-log.js';
import { createAuditMetrics, createMetrics, type GatewayMetrics } from './telemetry/metrics.js';
import { createRequestTelemetry, type RequestTelemetry } from './telemetry/request-telemetry.js';
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

/** The request telemetry and how traces travel: exported by the SDK's server spans, or propagated by hand. */
async function startRequestTelemetry(metrics: GatewayMetrics, logger: false | Logger, tracingActive: boolean) {
  const tracing = tracingActive ? await runningTracing() : undefined;
  const serverSpanPlugin = tracing?.fastifyPlugin;
  const propagateTraceContext = tracing !== undefined && serverSpanPlugin === undefined;
  const writeLine = logger === false ? undefined : requestLineWriter(logger);
  const requestTelemetry = createRequestTelemetry(metrics, {
    propagateTraceContext,
    ...(writeLine !== undefined && { writeLine }),
  });
  return { tracing, serverSpanPlugin, propagateTraceContext, writeLine, requestTelemetry };
}

interface Surroundings {
  readonly metrics: GatewayMetrics;
  readonly log: FastifyBaseLogger;
  readonly readiness: Readiness;
  readonly isTrustedProxy: (address: string) => boolean;
}

/** The participant: its replicas (upstream.replicas) or the one upstream.url, each probed on its own, and the forwarder. */
function connectUpstream(
  config: GatewayConfig,
  upstreamUrl: string,
  { metrics, log, isTrustedProxy }: Surroundings,
  trace: { readonly replacesTraceContext: boolean; readonly propagateTraceContext: boolean },
  /** The upstream part of a call and its replica, for the access log. */
  noteUpstream: (request: FastifyRequest, seconds: number, replica: string) => void,
) {
  const replicas = new UpstreamReplicas(config.upstream, upstreamUrl, log);
  metrics.watchReplicas(replicas);
  // One budget for every body held in memory (limits is read at start: a reload keeps it).
  const bodyBudget = new BodyBudget(config.limits);
  metrics.watchBodyBuffer(() => bodyBudget.heldBytes);
  const forwarder = createForwarder({
    replicas,
    bodyBudget,
    upstream: config.upstream,
    limits: config.limits,
    replacesTraceContext: trace.replacesTraceContext,
    // Propagated without spans, the participant is told the hop the client's traceresponse names (trace-context.ts).
    ...(trace.propagateTraceContext && { propagateTraceContext: true }),
    isTrustedProxy,
    onUpstreamTiming: (request, seconds) => {
      metrics.observeUpstream(
        request.operation.name,
        seconds,
        metrics.exemplars ? sampledTraceIdOf(request) : undefined,
      );
      noteUpstream(request, seconds, replicas.target.label);
    },
  });
  metrics.watchUpstream(forwarder.load);
  return { replicas, forwarder, bodyBudget };
}

/**
 * Authentication, protection, the policy, CORS and the version cache's TTLs follow the config: built
 * as one generation, swapped whole on a reload (live/generations.ts); each exchange pins the current
 * one. The participant's IdPs, while auth.participantIdentityProviders.enabled, follow reloads too.
 */
function startLiveConfig(
  config: GatewayConfig,
  { metrics, log, readiness, isTrustedProxy }: Surroundings,
  replicas: UpstreamReplicas,
  bodyBudget: BodyBudget,
) {
  const live = createLiveConfig(config, {
    metrics,
    log,
    isTrustedProxy,
    onKeySetFetch: (issuer, result) => metrics.jwksRefresh(issuer, result),
    onTokenAccepted: (issuer, kind) => metrics.tokenAccepted(issuer, kind),
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
  const reloads = createReloadMetrics(metrics.registry, live.current.fingerprint);
  const participantIdps = trustParticipantIdentityProviders(live, {
    get: (request) => replicas.ownGet(request), // the active replica, upstream.tls, not the clients' pool
    registry: metrics.registry,
    log,
    readiness,
    running: (fingerprint) => reloads.running(fingerprint),
  });
  return { live, reloads, participantIdps };
}

/** How a call that passed the list and its request rules is answered: from the version cache, or forwarded. */
function callAnswer(
  versionCache: VersionCache,
  forwarder: Forwarder,
  upstreamKey: string,
  audit: AuditTrail | undefined,
): (request: FastifyRequest, reply: FastifyReply) => Promise<void> | undefined {
  const answerCall = (request: FastifyRequest, reply: FastifyReply) => {
    const cached = request.generation.versionCache;
    return cached.ttlSeconds > 0 && request.method === 'GET' && request.operation.name === NamedOperations.getVersion
      ? versionCache.serve(request, reply, upstreamKey, cached)
      : forwarder.forward(request, reply);
  };
  // An audited write is forwarded once its intent record is written (a promise for writes only).
  if (audit === undefined) return answerCall;
  return (request, reply) => {
    if (!request.operation.writes) return answerCall(request, reply);
    const recorded = audit.beforeForward(request);
    return recorded === undefined ? answerCall(request, reply) : recorded.then(() => answerCall(request, reply));
  };
}

/** The gateway's own headers, the version cache, the request rules, the forwarder and the error answers: a call after the list. */
function serveCalls(
  api: FastifyInstance,
  stages: readonly Stage[],
  parts: {
    readonly live: LiveConfig;
    readonly forwarder: Forwarder;
    readonly participantIdps: ParticipantTrust;
    readonly requestTelemetry: RequestTelemetry;
    readonly upstreamKey: string;
    readonly audit: AuditTrail | undefined;
  },
  { metrics, log }: Surroundings,
): VersionCache {
  const { live, forwarder, participantIdps, requestTelemetry, audit } = parts;
  // Calls: the list runs as one hook (stage-runner.ts), synchronously unless a stage has to wait.
  // CORS, when the call's configuration has it (policy/cors.ts), adds its headers and answers a
  // preflight before authentication: browsers send a preflight without any token.
  api.addHook(
    'onRequest',
    stageHook(stages, {
      before: live.authenticate,
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
  const answer = callAnswer(versionCache, forwarder, parts.upstreamKey, audit);
  // The request rules run first in the handler, once Fastify has checked the media type: a promise
  // only on the rule-checked routes, whose bodies alone are read (no preHandler hook for every call).
  api.route({
    method: [...API_METHODS],
    url: '/*',
    handler: (request, reply) => {
      // A change of the participant's IdPs arms a refresh only once the participant answered it with
      // success (live/participant-idps.ts): never for a body still arriving or a caller it refused.
      if (IDENTITY_PROVIDER_CHANGES.has(request.operation.name))
        onResponseClose(reply.raw, () =>
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
  return versionCache;
}

/** Upgrades: the same list, then the tunnel; and the cap on open client connections. */
function serveUpgrades(
  api: FastifyInstance,
  stages: readonly Stage[],
  config: GatewayConfig,
  parts: {
    readonly live: LiveConfig;
    readonly replicas: UpstreamReplicas;
    readonly requestTelemetry: RequestTelemetry;
  },
  { metrics, log, isTrustedProxy }: Surroundings,
) {
  const tunnels = createWebSocketTunnels({
    replicas: parts.replicas,
    upstream: config.upstream,
    websocket: config.websocket,
    isTrustedProxy,
    onStreamEnded: (operation, endedBy) => metrics.webSocketStreamEnded(operation.name, endedBy),
    log,
  });
  const upgrades = createUpgradeHandler({
    stages,
    tunnels,
    telemetry: parts.requestTelemetry,
    correlationId: randomRequestId,
    log,
  });
  api.server.on('upgrade', upgrades.handleUpgrade);
  // Open client connections are capped as they are accepted, before TLS or any request
  // (protection.connections); a reload's caps apply to the connections accepted after it.
  const connections = limitConnections(api.server, parts.live.current.protection.connectionCaps, {
    isTrustedProxy,
    onRefused: (limit) => metrics.connectionRefused(limit),
  });
  parts.live.onSwap((next) => connections.setCaps(next.protection.connectionCaps));
  metrics.watchConnections(() => connections.open);
  metrics.watchWebSocketStreams(() => tunnels.openTunnels);
  return upgrades;
}

/**
 * What GET /config shows besides the running configuration: the secrets read from files are redacted
 * (those of every file applied so far), and the keys of the last valid file that wait for a restart.
 */
function shownConfig(live: LiveConfig, secretPathsAtStart: ReadonlySet<string> | undefined) {
  const secretPaths = new Set(secretPathsAtStart);
  let restartRequired: readonly string[] = [];
  return {
    report: () => ({
      fingerprint: live.current.fingerprint,
      restartRequired,
      config: redactedConfig(live.current.config, { fromFiles: secretPaths }),
    }),
    /** A file's values read with ${file:...}: redacted from then on. */
    addSecretPaths(paths: Iterable<string>) {
      for (const path of paths) secretPaths.add(path);
    },
    setRestartRequired(paths: readonly string[]) {
      restartRequired = paths;
    },
  };
}

/** Re-reads the configuration and swaps in what can change live (live/reload.ts). */
async function reloadLive(
  live: LiveConfig,
  load: () => Promise<ReloadSource> | ReloadSource,
  trigger: string,
  around: {
    readonly log: FastifyBaseLogger;
    readonly logger: false | Logger;
    readonly reloads: ReturnType<typeof createReloadMetrics>;
    readonly shown: ReturnType<typeof shownConfig>;
  },
): Promise<ReloadOutcome> {
  const { logger, shown } = around;
  const outcome = await reloadGateway(
    live,
    async () => {
      const source = await load();
      if (!('provenance' in source)) return source;
      shown.addSecretPaths(source.provenance.fromFiles);
      return source.config;
    },
    {
      log: around.log,
      metrics: around.reloads,
      trigger,
      setLogLevel: (level) => {
        if (logger !== false) logger.level = level;
      },
    },
  );
  if (outcome.result !== 'invalid') shown.setRestartRequired(outcome.restartRequired);
  return outcome;
}

/**
 * The audit trail of ledger writes (audit/), when audit.enabled: its own body reads are held to the
 * body budget and the policy's limits; its stdout copy goes the request lines' way.
 */
function startAuditTrail(
  config: GatewayConfig,
  bodyBudget: BodyBudget,
  writeLine: RequestLineWriter | undefined,
  { metrics, log, isTrustedProxy }: Surroundings,
): Promise<AuditTrail> | undefined {
  if (!config.audit.enabled) return undefined;
  const ownLimit = config.policy.maxBodyBytes <= config.limits.bodyBytes;
  return createAuditTrail(config.audit, {
    bodyLimits: {
      maxBytes: ownLimit ? config.policy.maxBodyBytes : config.limits.bodyBytes,
      maxBytesKey: ownLimit ? 'policy.maxBodyBytes' : 'limits.bodyBytes',
      timeoutMs: config.policy.bodyReadTimeoutMs,
      timeoutKey: 'policy.bodyReadTimeoutMs',
    },
    bodyBudget,
    isTrustedProxy,
    metrics: createAuditMetrics(metrics.registry, metrics.exemplars),
    log,
    ...(config.audit.stdout && writeLine !== undefined && { echo: (line: string) => writeLine.raw(line) }),
  });
}

/** The metrics, readiness and logger every part is built with, and who may speak for a client's address. */
function surroundings(
  config: GatewayConfig,
  options: GatewayOptions,
): { logger: false | Logger; around: Surroundings } {
  const metrics = createMetrics(options.registry, config.telemetry.metrics);
  const readiness = new Readiness();
  metrics.watchReadiness(() => readiness.report().checks);
  const isTrustedProxy = trustedProxyMatcher(config.server.trustedProxies);
  const logger = options.logger ?? createLogger(config.log.level);
  const log = (logger === false ? pino({ level: 'silent' }) : logger) as FastifyBaseLogger;
  return { logger, around: { metrics, log, readiness, isTrustedProxy } };
}

/** The access log (log.access), applied now and on each reload that changes it: its fields, sampling and redaction. */
function followAccessLog(
  requestTelemetry: RequestTelemetry,
  initial: GatewayConfig['log']['access'],
  isTrustedProxy: (address: string) => boolean,
) {
  let on = false;
  const apply = (access: GatewayConfig['log']['access']) => {
    on = access.enabled;
    requestTelemetry.setAccessLog(access.enabled ? createAccessLog(access, isTrustedProxy) : undefined);
  };
  apply(initial);
  return {
    apply,
    /** A call's upstream part and its replica: only the access log shows them. */
    noteUpstream: (request: FastifyRequest, seconds: number, replica: string) => {
      if (on) requestTelemetry.noteUpstream(request, seconds, replica);
    },
  };
}

/**
 * What the stage list runs between: the request telemetry (and how traces travel), the access log,
 * the API listener and the participant's side (replicas, body budget, forwarder).
 */
async function startEdges(
  config: GatewayConfig,
  options: GatewayOptions,
  logger: false | Logger,
  around: Surroundings,
) {
  const telemetry = await startRequestTelemetry(around.metrics, logger, options.tracingActive ?? false);
  const { serverSpanPlugin, propagateTraceContext, requestTelemetry } = telemetry;
  const accessLog = followAccessLog(requestTelemetry, config.log.access, around.isTrustedProxy);
  // server.tls: HTTPS (and WSS) on the API listener, the files re-read every reloadIntervalMs.
  const listenerTls = config.server.tls.certFile === undefined ? undefined : readServerTls(config.server.tls);
  const api = createApiServer(config.server, config.limits, { listenerTls, telemetry: requestTelemetry });
  const upstream = connectUpstream(
    config,
    options.upstreamUrl,
    around,
    { replacesTraceContext: serverSpanPlugin !== undefined, propagateTraceContext },
    accessLog.noteUpstream,
  );
  return { ...telemetry, accessLog, listenerTls, api, ...upstream };
}

/** The admin listener (health, metrics, GET /config as `shown`, the version cache's purge). */
function startAdmin(
  config: GatewayConfig,
  parts: { readonly live: LiveConfig; readonly replicas: UpstreamReplicas; readonly versionCache: VersionCache },
  secretPaths: ReadonlySet<string> | undefined,
  { metrics, log, readiness }: Surroundings,
) {
  const shown = shownConfig(parts.live, secretPaths);
  const admin = createAdminListener({
    admin: config.admin,
    readinessIntervalMs: config.upstream.readinessIntervalMs,
    readiness,
    registry: metrics.registry,
    upstream: parts.replicas,
    purgeVersionCache: () => parts.versionCache.clear(),
    runningConfig: shown.report,
    log,
  });
  return { admin, shown };
}

/** With server.tls, the API listener's certificate files are re-read every reloadIntervalMs; returns the stop. */
function watchTls(
  api: FastifyInstance,
  tls: GatewayConfig['server']['tls'],
  listenerTls: ReturnType<typeof readServerTls> | undefined,
  log: FastifyBaseLogger,
): (() => void) | undefined {
  return listenerTls === undefined
    ? undefined
    : watchListenerTls(api.server as unknown as TlsServer, tls, listenerTls, log);
}

/** Listens on the admin address, then the API's; the bound URLs. */
async function listenBoth(api: FastifyInstance, admin: AdminListener, server: GatewayConfig['server']) {
  const adminUrl = await admin.listen();
  const apiUrl = await api.listen({ host: server.host, port: server.port });
  return {
    api: boundUrl(api.server.address(), new URL(apiUrl).protocol),
    admin: boundUrl(admin.server.server.address(), new URL(adminUrl).protocol),
  };
}

export async function buildGateway(config: GatewayConfig, options: GatewayOptions): Promise<Gateway> {
  const { logger, around } = surroundings(config, options);
  const { metrics, log, readiness } = around;
  const edges = await startEdges(config, options, logger, around);
  const { tracing, serverSpanPlugin, writeLine, requestTelemetry, accessLog, listenerTls, api } = edges;
  const { replicas, forwarder, bodyBudget } = edges;

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
  const { live, reloads, participantIdps } = startLiveConfig(config, around, replicas, bodyBudget);
  api.addHook('onClose', () => live.close());
  const audit = await startAuditTrail(config, bodyBudget, writeLine, around);
  if (audit !== undefined) live.onSwap((next) => audit.setPolicy(next.config.audit.policy));
  live.onSwap((next, previous) => {
    if (!isDeepStrictEqual(next.config.log.access, previous.config.log.access)) accessLog.apply(next.config.log.access);
  });

  // The one list. Authentication comes before any body is read and before the version cache, so an
  // unauthenticated caller never costs a body read or sees a cached answer; a token it has not verified
  // yet first spends its address's budget (protection.unauthenticated). Protection follows it, so
  // that limits count principals and an unauthenticated flood never spends a caller's budget, and
  // precedes the policy's body read, so a refused call costs none; a WebSocket stream holds its
  // slot for the tunnel's life. Authorization precedes the version cache, so an unauthorized caller
  // never sees a cached body. The audit trail (audit/) then marks the ledger writes it records: a
  // call refused before is in the access log, not the trail. Its intent record is written in the
  // handler, after the request rules read the body (the identifying fields are in it), right before
  // forwarding.
  const stages: readonly Stage[] = [
    requestTelemetry.begin,
    live.pin,
    establishContext,
    live.authenticate,
    live.protect,
    live.authorize,
    ...(audit === undefined ? [] : [audit.stage]),
  ];
  const versionCache = serveCalls(
    api,
    stages,
    { live, forwarder, participantIdps, requestTelemetry, upstreamKey: options.upstreamUrl, audit },
    around,
  );
  const upgrades = serveUpgrades(api, stages, config, { live, replicas, requestTelemetry }, around);

  const stopTlsReload = watchTls(api, config.server.tls, listenerTls, log);
  const { admin, shown } = startAdmin(config, { live, replicas, versionCache }, options.secretPaths, around);

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
    await audit?.close(); // the last outcomes and a signed digest, before the last lines
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
    listen: () => listenBoth(api, admin, config.server),
    shutdown: () => shutdown.run(),
    close,
    reload: (load, trigger = 'api') => reloadLive(live, load, trigger, { log, logger, reloads, shown }),
    get fingerprint() {
      return live.current.fingerprint;
    },
  };
}
