// The only file that knows the order of the stages. Every exchange, a call or a WebSocket upgrade,
// walks one list: telemetry -> request context (operation, target check) -> authentication ->
// protection (limits) -> the consumer's quota -> authorization -> its brokered token -> audit mark.
// Then a call walks its own list (the IdP change watch, the request rules, the audit intent,
// cache-or-forward: server/calls.ts), an upgrade goes on to the tunnel (server/upgrades.ts).
// Telemetry writes each exchange's one log line.
import type { Server as TlsServer } from 'node:tls';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import type { Registry } from 'prom-client';
import { createAdminListener, type AdminListener } from './server/admin-listener.js';
import { createApiServer } from './server/api-server.js';
import { createVersionCache, type VersionCache } from './cache/version-cache.js';
import { readServerTls } from './config/load.js';
import type { GatewayConfig } from './config/schema.js';
import { createContextStage } from './exchange/context-stage.js';
import type { ReloadOutcome } from './live/reload.js';
import { runLiveConfiguration, type ReloadSource, type RunningConfiguration } from './live/running-configuration.js';
import type { Stage } from './exchange/exchange.js';
import { Readiness } from './health.js';
import { BodyBudget } from './body/budget.js';
import { streamedBodyLimits } from './body/read.js';
import type { CallStageEntry, LiveConfig, PinnedExchange } from './live/generations.js';
import type { ParticipantTrust } from './live/participant-idps.js';
import { capConnections } from './protection/connections.js';
import { createForwarder, type Forwarder } from './proxy/forward.js';
import { UpstreamReplicas } from './proxy/upstream-replicas.js';
import { createWebSocketTunnels } from './proxy/websocket.js';
import { trustedProxyMatcher } from './exchange/caller.js';
import { randomRequestId } from './exchange/request-id.js';
import { watchListenerTls } from './server/listener-tls.js';
import { listenBoth } from './server/bound-url.js';
import { gracefulShutdown } from './server/shutdown.js';
import { createLogger } from './telemetry/logging.js';
import { startAuditTrail, type AuditTrail } from './audit/audit-trail.js';
import { createMetrics, type GatewayMetrics } from './telemetry/metrics.js';
import { startLedgerPolicy } from './ledger-policy/stage.js';
import { createLargeBodyPool, LARGE_BODY_POOL } from './policy/large-body-pool.js';
import { startRequestTelemetry, type RequestTelemetry } from './telemetry/request-telemetry.js';
import { cacheOrForward, serveCalls } from './server/calls.js';
import { serveUpgrades } from './server/upgrades.js';

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

interface Surroundings {
  readonly metrics: GatewayMetrics;
  readonly log: FastifyBaseLogger;
  readonly readiness: Readiness;
  readonly isTrustedProxy: (address: string) => boolean;
}

/**
 * The participant: its replicas (upstream.replicas) or the one upstream.url, each probed on its own,
 * the forwarder and the WebSocket tunnels.
 */
function connectUpstream(
  config: GatewayConfig,
  upstreamUrl: string,
  { metrics, log, isTrustedProxy }: Surroundings,
  trace: { readonly replacesTraceContext: boolean; readonly propagateTraceContext: boolean },
  requestTelemetry: RequestTelemetry,
) {
  const replicas = new UpstreamReplicas(config.upstream, upstreamUrl, log);
  metrics.watchReplicas(replicas);
  // One budget for every body held in memory (limits is read at start: a reload keeps it).
  const bodyBudget = new BodyBudget(config.limits);
  metrics.watchBodyBuffer(() => bodyBudget.heldBytes);
  // Rule-checked bodies over 1 MiB are judged in worker threads (policy/large-body-pool.ts), one pool for the process.
  const largeBodies = createLargeBodyPool(LARGE_BODY_POOL);
  const forwarder = createForwarder({
    replicas,
    bodyBudget,
    upstream: config.upstream,
    limits: config.limits,
    replacesTraceContext: trace.replacesTraceContext,
    // Propagated without spans, the participant is told the hop the client's traceresponse names (trace-context.ts).
    ...(trace.propagateTraceContext && { propagateTraceContext: true }),
    isTrustedProxy,
    onUpstreamTiming: (request, seconds) => requestTelemetry.upstreamAnswered(request, seconds, replicas.target.label),
  });
  metrics.watchUpstream(forwarder.load);
  const tunnels = createWebSocketTunnels({
    replicas,
    upstream: config.upstream,
    websocket: config.websocket,
    isTrustedProxy,
    onStreamEnded: (operation, endedBy) => metrics.webSocketStreamEnded(operation.name, endedBy),
    log,
  });
  metrics.watchWebSocketStreams(() => tunnels.openTunnels);
  return { replicas, forwarder, bodyBudget, largeBodies, tunnels };
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
  const telemetry = await startRequestTelemetry(around.metrics, logger, {
    tracingActive: options.tracingActive ?? false,
    isTrustedProxy: around.isTrustedProxy,
  });
  const { serverSpanPlugin, propagateTraceContext, requestTelemetry } = telemetry;
  // server.tls: HTTPS (and WSS) on the API listener, the files re-read every reloadIntervalMs.
  const listenerTls = config.server.tls.certFile === undefined ? undefined : readServerTls(config.server.tls);
  const api = createApiServer(config.server, config.limits, {
    listenerTls,
    telemetry: requestTelemetry,
    watchPipelining: (queues) => around.metrics.watchPipelining(queues),
  });
  const upstream = connectUpstream(
    config,
    options.upstreamUrl,
    around,
    { replacesTraceContext: serverSpanPlugin !== undefined, propagateTraceContext },
    requestTelemetry,
  );
  return { ...telemetry, listenerTls, api, ...upstream };
}

/** The admin listener (health, metrics, GET /config, the version cache's purge). */
function startAdmin(
  config: GatewayConfig,
  parts: {
    readonly running: RunningConfiguration;
    readonly replicas: UpstreamReplicas;
    readonly versionCache: VersionCache;
  },
  { metrics, log, readiness }: Surroundings,
): AdminListener {
  return createAdminListener({
    admin: config.admin,
    readinessIntervalMs: config.upstream.readinessIntervalMs,
    readiness,
    registry: metrics.registry,
    upstream: parts.replicas,
    purgeVersionCache: () => parts.versionCache.clear(),
    runningConfig: parts.running.shown,
    usage: (from, to) => parts.running.live.consumerUsage(from, to),
    consumerStatus: () => parts.running.live.consumerStatus(),
    log,
  });
}

/**
 * The two lists, in the order every exchange walks them. A stage is one line here: its room's
 * factory with its configuration section and what it shares (docs/development.md#a-calls-own-stages).
 */
function stageLists(
  config: GatewayConfig,
  shared: Surroundings & { readonly bodyBudget: BodyBudget; readonly upstreamUrl: string },
  parts: {
    readonly live: LiveConfig;
    readonly requestTelemetry: RequestTelemetry;
    readonly shutdown: { readonly closing: boolean };
    readonly audit: AuditTrail | undefined;
    readonly participantIdps: ParticipantTrust;
    readonly versionCache: VersionCache;
    readonly forwarder: Forwarder;
  },
) {
  const { live, requestTelemetry, audit } = parts;
  const establishContext = createContextStage({
    routes: config.routes,
    enter: (exchange) => requestTelemetry.enter(exchange),
    shuttingDown: () => shared.readiness.isShuttingDown,
    closing: () => parts.shutdown.closing,
  });
  // The one list, for calls and upgrades alike. Authentication comes before any body is read and
  // before the version cache, so an unauthenticated caller never costs a body read or sees a cached
  // answer; a token it has not verified yet first spends its address's budget
  // (protection.unauthenticated). Protection follows it, so that limits count principals and an
  // unauthenticated flood never spends a caller's budget, and precedes the policy's body read, so a
  // refused call costs none; a WebSocket stream holds its slot for the tunnel's life. Authorization
  // precedes the version cache, so an unauthorized caller never sees a cached body. A consumer's
  // quota (consumers/) is counted once the limits admitted the call, and its brokered Canton token
  // got once the call is authorized, so that no refused call asks the identity provider for one. The audit trail
  // (audit/) then marks the ledger writes it records: a call refused before is in the access log,
  // not the trail. The ledger policy governs a stream's first message (its filter), which the tunnel
  // holds until it is judged; a call's body is judged in the call's own list.
  const stages: readonly Stage<PinnedExchange>[] = [
    requestTelemetry.begin,
    live.pin,
    establishContext,
    live.authenticate,
    live.protect,
    live.countQuota,
    live.authorize,
    live.brokerCredential,
    live.governStream,
    ...(audit === undefined ? [] : [audit.stage]),
  ];
  // Then a call's own list (server/calls.ts), once Fastify has checked its media type. A change of
  // the participant's IdPs is watched first: it arms a refresh only once the participant answered it
  // with success (live/participant-idps.ts), never for a body still arriving or a caller refused
  // after. The request rules read and judge the body on the rule-checked routes only. The ledger
  // policy decides a call of a caller a policy names on that body (reading it when they did not),
  // before the audit intent, so that the record carries its decision and a refused call is not
  // recorded as a write. A consumer's budgets are spent in the same place, right after it
  // (live/generations.ts ledgerStage; the stage itself where no budget is configured): on the
  // document it decided on, only for a call it let go on, and before the audit intent, so that a
  // call past a budget is not recorded as a write either. The audit intent follows them (the identifying fields are in the body they
  // parsed) and is written before the write goes on. Cache-or-forward answers.
  const callStages: readonly CallStageEntry[] = [
    parts.participantIdps.watchChange,
    live.pinned((generation) => generation.policy.enforceRequestRules),
    live.pinned((generation) => generation.decideAndSpend),
    ...(audit === undefined ? [] : [audit.recordIntent]),
    cacheOrForward(parts.versionCache, parts.forwarder, shared.upstreamUrl),
  ];
  return { stages, callStages };
}

export async function buildGateway(config: GatewayConfig, options: GatewayOptions): Promise<Gateway> {
  const { logger, around } = surroundings(config, options);
  const { metrics, log, readiness } = around;
  const edges = await startEdges(config, options, logger, around);
  const { tracing, serverSpanPlugin, writeLine, requestTelemetry, listenerTls, api } = edges;
  const { replicas, forwarder, bodyBudget, largeBodies, tunnels } = edges;

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
  const ledgerPolicy = startLedgerPolicy(config.ledgerPolicy, options.upstreamUrl, { ...around.metrics, log });
  // The audit trail (audit/, when audit.enabled) reads bodies up to the participant's limit: a large one
  // parsed in a turn of its own; its stdout copy goes the request lines' way.
  const audit = await startAuditTrail(config.audit, streamedBodyLimits(config.policy, config.limits), {
    ...around.metrics,
    log,
    isTrustedProxy: around.isTrustedProxy,
    bodyBudget,
    writeRaw: writeLine && ((line) => writeLine.raw(line)),
  });
  const running = runLiveConfiguration(config, {
    ...around,
    logger,
    bodyBudget,
    largeBodies,
    ledgerPolicy,
    participantGet: (request) => replicas.ownGet(request), // the active replica, upstream.tls, not the clients' pool
    secretPaths: options.secretPaths,
  });
  const { live, participantIdps } = running;
  api.addHook('onClose', () => live.close());
  // The GET /v2/version cache (cache/), keyed by upstream (cacheOrForward) so that another participant's answer is never served.
  const versionCache = createVersionCache({
    fetchVersion: (request) => forwarder.fetchWhole(request, VERSION_ANSWER_MAX_BYTES),
    count: (result) => metrics.versionCache(result),
  });
  const connections = capConnections(api.server, live.current.protection.connectionCaps, around);

  // What lives across exchanges follows the keys it reads, at start and on each reload that changes
  // them; what an exchange reads is on the generation it pinned (docs/development.md#a-key-that-reloads-live).
  live.follow(({ config }) => config.log.access, requestTelemetry.followAccessLog);
  requestTelemetry.observeFinishedWith(live.observeConsumer); // usage per consumer, under each exchange's own generation
  live.follow((generation) => generation.versionCache, versionCache.clear);
  live.follow(
    (generation) => generation.protection.connectionCaps,
    (caps) => connections.setCaps(caps),
  );
  if (audit !== undefined)
    live.follow(
      ({ config }) => config.audit.policy,
      (policy) => audit.setPolicy(policy),
    );

  const { stages, callStages } = stageLists(
    config,
    { ...around, bodyBudget, upstreamUrl: options.upstreamUrl },
    { live, requestTelemetry, shutdown, audit, participantIdps, versionCache, forwarder },
  );
  serveCalls(api, { stages, callStages, corsBefore: live.authenticate, log });
  const upgrades = serveUpgrades(api, {
    stages,
    tunnels,
    telemetry: requestTelemetry,
    correlationId: randomRequestId,
    log,
  });

  // server.tls: the API listener's certificate files are re-read every reloadIntervalMs.
  const stopTlsReload =
    listenerTls === undefined
      ? undefined
      : watchListenerTls(api.server as unknown as TlsServer, config.server.tls, listenerTls, log);
  const admin = startAdmin(config, { running, replicas, versionCache }, around);

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
    await ledgerPolicy.runtime.close();
    await largeBodies.close();
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
    reload: (load, trigger = 'api') => running.reload(load, trigger),
    get fingerprint() {
      return live.current.fingerprint;
    },
  };
}
