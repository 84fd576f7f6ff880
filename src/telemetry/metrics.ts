// Metric names and labels: a contract documented in docs/errors-and-metrics.md. One Registry per app.
// Every label value comes from a bounded set: the route catalogue, the error catalogue, codes
// that match Canton's code pattern (capped), a status number. Never a raw URL, a user or a token.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type RegistryContentType } from 'prom-client';
import { errorCodeLabeler } from '../errors.js';
import type { LedgerDecisionNote } from '../exchange/exchange.js';
import { OPERATION_NAMES, UNKNOWN_OPERATION } from '../operations.js';
import { BUILD_VERSION } from './build-info.js';
import { droppedLogLines } from './logging.js';
import {
  PlainCounter,
  PlainHistogram,
  registerPlainMetric,
  type CounterSeries,
  type HistogramSeries,
} from './plain-metrics.js';

export const MetricNames = {
  requests: 'ledger_gateway_requests_total',
  requestDuration: 'ledger_gateway_request_duration_seconds',
  upstreamDuration: 'ledger_gateway_upstream_request_duration_seconds',
  authFailures: 'ledger_gateway_auth_failures_total',
  versionCache: 'ledger_gateway_version_cache_requests_total',
  jwksRefreshes: 'ledger_gateway_jwks_refreshes_total',
  tokensAccepted: 'ledger_gateway_tokens_accepted_total',
  inflight: 'ledger_gateway_inflight_requests',
  buildInfo: 'ledger_gateway_build_info',
  protectionRefusals: 'ledger_gateway_protection_refusals_total',
  protectionStoreFailures: 'ledger_gateway_protection_store_failures_total',
  protectionStoreUp: 'ledger_gateway_protection_store_up',
  protectionStoreErrors: 'ledger_gateway_protection_store_errors_total',
  tokenSignatureChecks: 'ledger_gateway_token_signature_checks_total',
  logLinesDropped: 'ledger_gateway_log_lines_dropped_total',
  upstreamCallsInFlight: 'ledger_gateway_upstream_calls_in_flight',
  upstreamCallsQueued: 'ledger_gateway_upstream_calls_queued',
  webSocketStreamsOpen: 'ledger_gateway_websocket_streams_open',
  upstreamReplicaUp: 'ledger_gateway_upstream_replica_up',
  upstreamFailovers: 'ledger_gateway_upstream_failovers_total',
  ready: 'ledger_gateway_ready',
  webSocketStreamsEnded: 'ledger_gateway_websocket_streams_ended_total',
  connectionsOpen: 'ledger_gateway_connections_open',
  connectionsRefused: 'ledger_gateway_connections_refused_total',
  auditRecordsWritten: 'ledger_gateway_audit_records_written_total',
  auditBytesWritten: 'ledger_gateway_audit_bytes_written_total',
  auditSyncDuration: 'ledger_gateway_audit_sync_duration_seconds',
  auditRecordsLost: 'ledger_gateway_audit_records_lost_total',
  auditWritesRefused: 'ledger_gateway_audit_writes_refused_total',
  auditWriteFailures: 'ledger_gateway_audit_write_failures_total',
  auditTrailWritable: 'ledger_gateway_audit_trail_writable',
  auditPendingBytes: 'ledger_gateway_audit_pending_bytes',
  auditTrailBytes: 'ledger_gateway_audit_trail_bytes',
  auditTrailMaxBytes: 'ledger_gateway_audit_trail_max_bytes',
  auditFilesRemoved: 'ledger_gateway_audit_files_removed_total',
  auditVolumeFreeBytes: 'ledger_gateway_audit_volume_free_bytes',
  auditVolumeSizeBytes: 'ledger_gateway_audit_volume_size_bytes',
  auditRecordsShortened: 'ledger_gateway_audit_records_shortened_total',
  auditCallerShareExceeded: 'ledger_gateway_audit_caller_share_exceeded_total',
  configReloads: 'ledger_gateway_config_reloads_total',
  configInfo: 'ledger_gateway_config_info',
  configRestartRequired: 'ledger_gateway_config_restart_required',
  participantIdpRefreshes: 'ledger_gateway_participant_idp_refreshes_total',
  participantIdpsLeftOut: 'ledger_gateway_participant_idps_left_out',
  bodyBufferBytes: 'ledger_gateway_body_buffer_bytes',
  ledgerPolicyDecisions: 'ledger_gateway_ledger_policy_decisions_total',
  consumerCalls: 'ledger_gateway_consumer_calls_total',
  consumerRequestBytes: 'ledger_gateway_consumer_request_bytes_total',
  consumerResponseBytes: 'ledger_gateway_consumer_response_bytes_total',
  consumerCallDuration: 'ledger_gateway_consumer_call_duration_seconds',
  consumerQuotaRefusals: 'ledger_gateway_consumer_quota_refusals_total',
  consumerBudgetRefusals: 'ledger_gateway_consumer_budget_refusals_total',
  upstreamTokenRequests: 'ledger_gateway_upstream_token_requests_total',
  pipelinedRequestsWaiting: 'ledger_gateway_pipelined_requests_waiting',
  pipelinedBytesWaiting: 'ledger_gateway_pipelined_bytes_waiting',
  pipelinedConnectionsCut: 'ledger_gateway_pipelined_connections_cut_total',
  tokenCacheBytes: 'ledger_gateway_token_cache_bytes',
} as const;

/** submit-and-wait holds a call until the transaction commits: buckets reach 60 s. */
export const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60];

/** Default process metrics that promtool rejects (gauges named *_total); the per-type gauges next to them hold the same numbers. */
const LINT_FAILING_DEFAULT_METRICS = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
];

const KNOWN_METHOD_LIST: readonly string[] = [
  'GET',
  'HEAD',
  'POST',
  'PUT',
  'PATCH',
  'DELETE',
  'OPTIONS',
  'CONNECT',
  'TRACE',
];
const KNOWN_METHODS = new Set(KNOWN_METHOD_LIST);
const OPERATIONS = new Set(OPERATION_NAMES);

/** A label fed by another stage (auth reasons, issuers): kept up to `cap` distinct values, then `other`. */
function boundedLabel(cap: number): (value: string) => string {
  const seen = new Set<string>();
  return (value) => {
    if (seen.has(value)) return value;
    if (seen.size >= cap || value.length > 200) return 'other';
    seen.add(value);
    return value;
  };
}

export function methodLabel(method: string): string {
  return KNOWN_METHODS.has(method) ? method : '_OTHER';
}

/** 0..9: the method's place among KNOWN_METHODS, 9 for any other (all of which share the label _OTHER). */
function methodIndex(method: string): number {
  const index = KNOWN_METHOD_LIST.indexOf(method);
  return index === -1 ? KNOWN_METHOD_LIST.length : index;
}

export function operationLabel(operation: string): string {
  return OPERATIONS.has(operation) ? operation : UNKNOWN_OPERATION.name;
}

export type VersionCacheResult = 'hit' | 'miss' | 'stale' | 'coalesced';

export interface MetricsOptions {
  /** OpenMetrics exemplars (trace_id) on the duration histograms; /metrics then answers OpenMetrics. */
  readonly exemplars: boolean;
  /** Distinct participant error codes kept as error_code values before OTHER. */
  readonly maxUpstreamErrorCodes: number;
}

export const DEFAULT_METRICS_OPTIONS: MetricsOptions = { exemplars: false, maxUpstreamErrorCodes: 100 };

export interface GatewayMetrics {
  readonly registry: Registry;
  /** Whether observations take a trace id as their exemplar (callers skip finding one otherwise). */
  readonly exemplars: boolean;
  /** One finished request; `traceId` (of a sampled trace) becomes the exemplar when exemplars are on. */
  observeRequest(
    operation: string,
    method: string,
    status: number,
    errorCode: string | null,
    seconds: number,
    traceId?: string,
  ): void;
  observeUpstream(operation: string, seconds: number, traceId?: string): void;
  authFailure(reason: string): void;
  versionCache(result: VersionCacheResult): void;
  jwksRefresh(issuer: string, result: 'success' | 'failure'): void;
  /** A token verified and accepted (once per token), through an audience or a scope (auth/claims.ts TokenKind). */
  tokenAccepted(issuer: string, kind: 'audience' | 'scope'): void;
  inflight(operation: string, delta: 1 | -1): void;
  /** A call refused by a protection limit (`limit`: a LimitName of protection/store.ts). */
  protectionRefusal(operation: string, limit: string): void;
  /** The shared limit store (Redis) could not answer; `failMode` says what the call got. */
  protectionStoreFailure(failMode: 'open' | 'closed'): void;
  /** Redis failed in a way an outage does not explain (`reason`: a RedisProblem of protection/redis-connection.ts). */
  protectionStoreError(reason: string): void;
  /** Where ledger_gateway_protection_store_up reads whether the limit store answers (default: always). */
  watchProtectionStore(ready: () => boolean): void;
  /** Where ledger_gateway_token_signature_checks_total reads the authenticator's count (read at scrape, no hot-path cost). */
  watchSignatureChecks(count: () => number): void;
  /** Where the upstream pool gauges read the forwarder's counts (at scrape). */
  watchUpstream(load: () => { inFlight: number; queued: number }): void;
  /** Where ledger_gateway_websocket_streams_open reads the open tunnels (at scrape). */
  watchWebSocketStreams(open: () => number): void;
  /** Where ledger_gateway_ready reads each readiness check, as /readyz reports them (at scrape). */
  watchReadiness(checks: () => Readonly<Record<string, 'ok' | 'failing'>>): void;
  /** A WebSocket tunnel closed; `endedBy`: a StreamEnd (exchange/exchange.ts). */
  webSocketStreamEnded(operation: string, endedBy: string): void;
  /** A client connection closed as it was accepted, over protection.connections' `limit`. */
  connectionRefused(limit: 'total' | 'perAddress'): void;
  /** Where ledger_gateway_connections_open reads the API listener's open client connections (at scrape). */
  watchConnections(open: () => number): void;
  /** Where the replica gauge and the failover counter read the upstream replicas (at scrape). */
  watchReplicas(replicas: ReplicaReport): void;
  /** Where ledger_gateway_body_buffer_bytes reads the request bodies held in memory (at scrape). */
  watchBodyBuffer(heldBytes: () => number): void;
  /** Where the pipelining metrics read what waits for its turn, and the connections cut (at scrape). */
  watchPipelining(queues: PipelineReport): void;
  /** Where ledger_gateway_token_cache_bytes reads the bytes of verified tokens remembered (at scrape). */
  watchTokenCache(heldBytes: () => number): void;
}

/** What the pipelining metrics read: requests and bytes waiting now, connections cut so far. */
export interface PipelineReport {
  readonly requests: number;
  readonly bytes: number;
  readonly cuts: number;
}

/** What the replica metrics read: each replica's label (a configured name or its index, never a URL). */
export interface ReplicaReport {
  states(): ReadonlyArray<{ readonly label: string; readonly up: boolean }>;
  readonly failovers: number;
}

type CounterChild = ReturnType<Counter<string>['labels']>;

/** The two series one finished request updates. */
interface RequestSeries {
  readonly count: CounterSeries;
  readonly duration: HistogramSeries;
}

/** Memoizes prom-client children: `labels()` validates and hashes on every call. */
function memo<T>(create: (key: string) => T): (key: string) => T {
  const children = new Map<string, T>();
  return (key) => {
    let child = children.get(key);
    if (child === undefined) {
      child = create(key);
      children.set(key, child);
    }
    return child;
  };
}

/** Names a counter: in the OpenMetrics format (with exemplars) prom-client appends _total itself. */
type CounterNamer = (name: string) => string;

/**
 * A counter's name as it is registered: MetricNames' `_total` name, without the suffix when exemplars
 * are on (the registry then answers OpenMetrics, whose counters prom-client suffixes itself).
 */
export function registeredCounterName(name: string, exemplars: boolean): string {
  return exemplars ? name.replace(/_total$/, '') : name;
}

export function createMetrics(
  registry: Registry = new Registry(),
  options: MetricsOptions = DEFAULT_METRICS_OPTIONS,
): GatewayMetrics {
  const exemplars = options.exemplars;
  // Exemplars exist only in the OpenMetrics format; prom-client then appends _total to counters itself.
  if (exemplars) (registry as Registry<RegistryContentType>).setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
  const counterName: CounterNamer = (name) => registeredCounterName(name, exemplars);

  collectDefaultMetrics({ register: registry });
  for (const name of LINT_FAILING_DEFAULT_METRICS) registry.removeSingleMetric(name);
  new Gauge({
    name: MetricNames.buildInfo,
    help: 'Gateway build information; always 1.',
    labelNames: ['version', 'node_version'] as const,
    registers: [registry],
  }).set({ version: BUILD_VERSION, node_version: process.version }, 1);

  return {
    registry,
    exemplars,
    ...requestMetrics(registry, counterName, options),
    ...refusalMetrics(registry, counterName),
    ...tokenMetrics(registry, counterName),
    ...scrapedMetrics(registry, counterName),
  };
}

/**
 * Tokens accepted, by how: Canton 3.7 drops scope-based tokens (`UNRELEASED.md` on main, deprecated
 * in 3.5), so a `scope` series that still grows names an issuer whose clients must move first.
 */
function tokenMetrics(registry: Registry, counterName: CounterNamer): Pick<GatewayMetrics, 'tokenAccepted'> {
  const accepted = new Counter({
    name: counterName(MetricNames.tokensAccepted),
    help:
      'Tokens verified and accepted (once per token; calls the verified-token cache answers are not counted), ' +
      'by issuer and kind: audience (an aud the participant or the issuer names) or scope (daml_ledger_api or ' +
      "the issuer's scope; removed in Canton 3.7).",
    labelNames: ['issuer', 'kind'] as const,
    registers: [registry],
  });
  const issuerLabel = boundedLabel(50);
  return {
    tokenAccepted(issuer, kind) {
      accepted.labels(issuerLabel(issuer), kind).inc();
    },
  };
}

/** What every request updates: counted in plain numbers (plain-metrics.ts), printed by the registry. */
function requestMetrics(
  registry: Registry,
  counterName: CounterNamer,
  options: MetricsOptions,
): Pick<GatewayMetrics, 'observeRequest' | 'observeUpstream' | 'versionCache' | 'inflight'> {
  const requests = new PlainCounter(
    counterName(MetricNames.requests),
    "Finished requests by operation, method, status and error code (none, the gateway's own code, or the participant's).",
    ['operation', 'method', 'status', 'error_code'],
  );
  const requestDuration = new PlainHistogram(
    MetricNames.requestDuration,
    'Total request time in the gateway, from the request head to the last byte of the answer, by operation, method and status.',
    ['operation', 'method', 'status'],
    DURATION_BUCKETS,
    options.exemplars,
  );
  const upstreamDuration = new PlainHistogram(
    MetricNames.upstreamDuration,
    "Time until the participant's answer headers, by operation.",
    ['operation'],
    DURATION_BUCKETS,
    options.exemplars,
  );
  // Counted on every cached answer: plain numbers too.
  const versionCache = new PlainCounter(
    counterName(MetricNames.versionCache),
    'GET /v2/version cache lookups by result.',
    ['result'],
  );
  for (const metric of [requests, requestDuration, upstreamDuration, versionCache])
    registerPlainMetric(registry, metric);
  // Counted in a plain map on the request path; the gauge reads it when scraped.
  const inflightCounts = new Map<string, number>();
  new Gauge({
    name: MetricNames.inflight,
    help: 'Requests in flight by operation.',
    labelNames: ['operation'] as const,
    registers: [registry],
    collect() {
      for (const [operation, count] of inflightCounts) this.labels(operation).set(count);
    },
  });

  const errorCodeLabel = errorCodeLabeler(options.maxUpstreamErrorCodes);
  // Series by operation, then status and method (one number), then error code: no key is built per call.
  const requestSeriesByOperation = new Map<string, Map<number, Map<string, RequestSeries>>>();
  const durationSeries = memo<HistogramSeries>((key) => {
    const [operation, method, status] = key.split(' ') as [string, string, string];
    return requestDuration.series(operation, method, status);
  });
  function requestSeries(operation: string, method: string, status: number, code: string): RequestSeries {
    let byStatus = requestSeriesByOperation.get(operation);
    if (byStatus === undefined)
      requestSeriesByOperation.set(operation, (byStatus = new Map<number, Map<string, RequestSeries>>()));
    const statusAndMethod = status * 16 + methodIndex(method);
    let byCode = byStatus.get(statusAndMethod);
    if (byCode === undefined) byStatus.set(statusAndMethod, (byCode = new Map<string, RequestSeries>()));
    let series = byCode.get(code);
    if (series === undefined) {
      const methodName = methodLabel(method);
      series = {
        count: requests.series(operation, methodName, String(status), code),
        // Keys join label values with a space, which none of them contains.
        duration: durationSeries(`${operation} ${methodName} ${status}`),
      };
      byCode.set(code, series);
    }
    return series;
  }
  const upstreamSeries = memo((operation) => upstreamDuration.series(operation));
  const cacheSeries = memo<CounterSeries>((result) => versionCache.series(result));

  return {
    observeRequest(operation, method, status, errorCode, seconds, traceId) {
      const series = requestSeries(operationLabel(operation), method, status, errorCodeLabel(errorCode, status));
      series.count.inc();
      series.duration.observe(seconds, traceId);
    },
    observeUpstream(operation, seconds, traceId) {
      upstreamSeries(operationLabel(operation)).observe(seconds, traceId);
    },
    versionCache(result) {
      cacheSeries(result).inc();
    },
    inflight(operation, delta) {
      const label = operationLabel(operation);
      inflightCounts.set(label, (inflightCounts.get(label) ?? 0) + delta);
    },
  };
}

/** Counters of refusals and failures, labelled by bounded sets (reasons and issuers capped, then `other`). */
function refusalMetrics(
  registry: Registry,
  counterName: CounterNamer,
): Pick<
  GatewayMetrics,
  | 'authFailure'
  | 'jwksRefresh'
  | 'protectionRefusal'
  | 'protectionStoreFailure'
  | 'protectionStoreError'
  | 'webSocketStreamEnded'
  | 'connectionRefused'
> {
  const counter = <L extends string>(name: string, help: string, labelNames: readonly L[]) =>
    new Counter<L>({ name: counterName(name), help, labelNames, registers: [registry] });
  const authFailures = counter(MetricNames.authFailures, 'Refused credentials by reason.', ['reason']);
  const jwksRefreshes = counter(MetricNames.jwksRefreshes, 'Key set fetches by issuer and result.', [
    'issuer',
    'result',
  ]);
  const protectionRefusals = counter(
    MetricNames.protectionRefusals,
    'Calls refused by a protection limit, by operation and limit (a LimitName of protection/store.ts).',
    ['operation', 'limit'],
  );
  const protectionStoreFailures = counter(
    MetricNames.protectionStoreFailures,
    'Admissions the shared limit store (Redis) could not answer, by the fail mode applied (open: admitted unchecked, closed: refused).',
    ['fail_mode'],
  );
  const protectionStoreErrors = counter(
    MetricNames.protectionStoreErrors,
    'Redis failures an outage does not explain, by reason: authentication (the credentials were refused), reply_too_large (a reply past protection.redis.maxReplyBytes; the connection was cut), master_at_sentinel (a sentinel named a sentinel address as the master; its answer was refused).',
    ['reason'],
  );
  const streamsEnded = counter(
    MetricNames.webSocketStreamsEnded,
    'WebSocket streams closed, by operation and by what ended them ' +
      '(client, participant, idle_timeout, byte_rate, keepalive_timeout, shutdown, replica_changed; refused: the ledger policy refused its first message).',
    ['operation', 'ended_by'],
  );
  const connectionsRefused = counter(
    MetricNames.connectionsRefused,
    'Client connections closed as they were accepted, by the cap they were over (total, perAddress).',
    ['limit'],
  );

  const reasonLabel = boundedLabel(50);
  const issuerLabel = boundedLabel(50);
  const refusalSeries = memo<CounterChild>((key) => {
    const space = key.indexOf(' ');
    return protectionRefusals.labels(key.slice(0, space), key.slice(space + 1));
  });
  const authSeries = memo<CounterChild>((reason) => authFailures.labels(reason));
  const jwksSeries = memo<CounterChild>((key) => {
    const space = key.lastIndexOf(' ');
    return jwksRefreshes.labels(key.slice(0, space), key.slice(space + 1));
  });

  return {
    authFailure(reason) {
      authSeries(reasonLabel(reason)).inc();
    },
    jwksRefresh(issuer, result) {
      jwksSeries(`${issuerLabel(issuer)} ${result}`).inc();
    },
    protectionRefusal(operation, limit) {
      refusalSeries(`${operationLabel(operation)} ${limit}`).inc();
    },
    protectionStoreFailure(failMode) {
      protectionStoreFailures.labels(failMode).inc();
    },
    protectionStoreError(reason) {
      protectionStoreErrors.labels(reason).inc();
    },
    webSocketStreamEnded(operation, endedBy) {
      streamsEnded.labels(operationLabel(operation), endedBy).inc();
    },
    connectionRefused(limit) {
      connectionsRefused.labels(limit).inc();
    },
  };
}

type Watchers = Pick<
  GatewayMetrics,
  | 'watchProtectionStore'
  | 'watchSignatureChecks'
  | 'watchUpstream'
  | 'watchWebSocketStreams'
  | 'watchReadiness'
  | 'watchConnections'
  | 'watchReplicas'
  | 'watchBodyBuffer'
  | 'watchPipelining'
  | 'watchTokenCache'
>;

/** A gauge whose one value is read at each scrape. */
function scrapedGauge(registry: Registry, name: string, help: string, read: () => number): void {
  new Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      this.set(read());
    },
  });
}

/** A counter that reports, at each scrape, how far a count kept elsewhere has grown. */
function countedElsewhere(
  registry: Registry,
  counterName: CounterNamer,
  name: string,
  help: string,
  read: () => number,
): void {
  let reported = 0;
  new Counter({
    name: counterName(name),
    help,
    registers: [registry],
    collect() {
      const now = read();
      if (now > reported) this.inc(now - reported);
      reported = now;
    },
  });
}

/** Gauges and counters read at scrape from counts other rooms keep (no cost on the request path). */
function scrapedMetrics(registry: Registry, counterName: CounterNamer): Watchers {
  let signatureChecks = () => 0;
  countedElsewhere(
    registry,
    counterName,
    MetricNames.tokenSignatureChecks,
    'Token signature verifications; a verified-token cache hit costs none, so this grows with new tokens, not with calls.',
    () => signatureChecks(),
  );
  countedElsewhere(
    registry,
    counterName,
    MetricNames.logLinesDropped,
    'Log lines dropped because stdout did not take them and 16 MiB of lines were already waiting for it.',
    droppedLogLines,
  );
  let protectionStoreReady = () => true;
  scrapedGauge(
    registry,
    MetricNames.protectionStoreUp,
    '1 while the limit store answers (always, in memory); 0 while Redis is unreachable and protection.failMode applies.',
    () => (protectionStoreReady() ? 1 : 0),
  );
  // Registered after those, in this order: the exposition lists them as before.
  return {
    watchSignatureChecks(count) {
      signatureChecks = count;
    },
    watchProtectionStore(ready) {
      protectionStoreReady = ready;
    },
    ...loadMetrics(registry),
    ...healthMetrics(registry, counterName),
    ...heldByCallersMetrics(registry, counterName),
  };
}

/** What callers make the process hold: pipelined requests waiting (limits.pipelining) and the connections cut, verified tokens remembered (read at scrape). */
function heldByCallersMetrics(
  registry: Registry,
  counterName: CounterNamer,
): Pick<GatewayMetrics, 'watchPipelining' | 'watchTokenCache'> {
  let queues: PipelineReport = { requests: 0, bytes: 0, cuts: 0 };
  scrapedGauge(
    registry,
    MetricNames.pipelinedRequestsWaiting,
    'Pipelined requests waiting for their turn on their client connection, all connections together (limits.pipelining.totalRequests).',
    () => queues.requests,
  );
  scrapedGauge(
    registry,
    MetricNames.pipelinedBytesWaiting,
    'Bytes of the heads of the pipelined requests waiting for their turn, all connections together (limits.pipelining.totalBytes).',
    () => queues.bytes,
  );
  countedElsewhere(
    registry,
    counterName,
    MetricNames.pipelinedConnectionsCut,
    'Client connections closed at once because a pipelined request would have passed limits.pipelining.totalRequests or totalBytes.',
    () => queues.cuts,
  );
  let tokenCacheBytes = () => 0;
  scrapedGauge(
    registry,
    MetricNames.tokenCacheBytes,
    'Bytes of the verified tokens the token cache remembers, against auth.tokenCache.maxBytes.',
    () => tokenCacheBytes(),
  );
  return {
    watchPipelining(report) {
      queues = report;
    },
    watchTokenCache(heldBytes) {
      tokenCacheBytes = heldBytes;
    },
  };
}

/** What the gateway holds now: upstream calls, streams, body bytes, client connections (read at scrape). */
function loadMetrics(
  registry: Registry,
): Pick<GatewayMetrics, 'watchUpstream' | 'watchWebSocketStreams' | 'watchBodyBuffer' | 'watchConnections'> {
  let upstreamLoad = () => ({ inFlight: 0, queued: 0 });
  scrapedGauge(
    registry,
    MetricNames.upstreamCallsInFlight,
    "Calls handed to the participant's connection pool, at most upstream.connections (version fetches included).",
    () => upstreamLoad().inFlight,
  );
  scrapedGauge(
    registry,
    MetricNames.upstreamCallsQueued,
    'Calls waiting in the gateway for a free upstream connection (every one of upstream.connections busy); each waits at most its timeout, then gets 503.',
    () => upstreamLoad().queued,
  );
  let openStreams = () => 0;
  scrapedGauge(
    registry,
    MetricNames.webSocketStreamsOpen,
    'WebSocket streams tunnelled to the participant and still open (each also holds a protection slot).',
    () => openStreams(),
  );
  let bodyBufferBytes = () => 0;
  scrapedGauge(
    registry,
    MetricNames.bodyBufferBytes,
    'Bytes of request bodies held in memory, against limits.bufferedBodyBytes.',
    () => bodyBufferBytes(),
  );
  let openConnections = () => 0;
  scrapedGauge(
    registry,
    MetricNames.connectionsOpen,
    'Client connections open on the API listener (WebSocket streams included).',
    () => openConnections(),
  );
  return {
    watchUpstream(load) {
      upstreamLoad = load;
    },
    watchWebSocketStreams(open) {
      openStreams = open;
    },
    watchBodyBuffer(heldBytes) {
      bodyBufferBytes = heldBytes;
    },
    watchConnections(open) {
      openConnections = open;
    },
  };
}

/** The participant's replicas (up, failovers) and the readiness checks, by label (read at scrape). */
function healthMetrics(
  registry: Registry,
  counterName: CounterNamer,
): Pick<GatewayMetrics, 'watchReplicas' | 'watchReadiness'> {
  let replicas: ReplicaReport = { states: () => [], failovers: 0 };
  new Gauge({
    name: MetricNames.upstreamReplicaUp,
    help:
      '1 while a participant replica answers the probe (GET /v2/version below 500), 0 while not, by replica ' +
      '(its configured name or its index; 0 for upstream.url).',
    labelNames: ['replica'] as const,
    registers: [registry],
    collect() {
      for (const { label, up } of replicas.states()) this.labels(label).set(up ? 1 : 0);
    },
  });
  countedElsewhere(
    registry,
    counterName,
    MetricNames.upstreamFailovers,
    'Times calls moved from the active participant replica to another.',
    () => replicas.failovers,
  );
  let readinessChecks: () => Readonly<Record<string, 'ok' | 'failing'>> = () => ({});
  new Gauge({
    name: MetricNames.ready,
    help:
      '1 while a readiness check passes, 0 while it fails, by check (shutdown, keys, upstream); ' +
      '/readyz answers 503 while any is 0.',
    labelNames: ['check'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [check, state] of Object.entries(readinessChecks())) this.labels(check).set(state === 'ok' ? 1 : 0);
    },
  });
  return {
    watchReplicas(report) {
      replicas = report;
    },
    watchReadiness(checks) {
      readinessChecks = checks;
    },
  };
}

/** The audit trail's metrics (src/audit/): counted as records are written, never per read. */
export interface AuditMetrics {
  written(records: number, bytes: number): void;
  synced(seconds: number): void;
  /**
   * A record the trail could not write, once per write: `intent`, a write forwarded without its
   * intent on disk (failMode open); `outcome`, the outcome of a forwarded write.
   */
  lost(kind: 'intent' | 'outcome'): void;
  /** A write refused because its intent record could not be written (failMode closed). */
  refused(operation: string): void;
  /** A failed write or sync of the trail file. */
  writeFailed(): void;
  /** Files removed by retention (audit.retainFiles, audit.maxTrailBytes). */
  filesRemoved(files: number): void;
  /** A record shortened: over audit.maxRecordBytes, or its caller over its share (failMode open). */
  shortened(reason: 'maxRecordBytes' | 'callerShare'): void;
  /** A write over its caller's share of the trail (audit.callerBytesPerMinute). */
  shareExceeded(): void;
  /** What the gauges read at scrape: whether the trail takes records, its bytes waiting and on disk, its volume. */
  watch(trail: AuditGauges): void;
}

export interface AuditGauges {
  writable(): boolean;
  pendingBytes(): number;
  trailBytes(): number;
  readonly maxTrailBytes: number;
  /** The volume holding the trail's directory (statfs), undefined when it cannot be read. */
  volume(): Promise<{ freeBytes: number; sizeBytes: number } | undefined>;
}

/** Sync latencies from a fast NVMe's tens of microseconds to a struggling disk's seconds. */
const SYNC_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

export function createAuditMetrics(registry: Registry, exemplars: boolean): AuditMetrics {
  const counterName: CounterNamer = (name) => registeredCounterName(name, exemplars);
  const written = new Counter({
    name: counterName(MetricNames.auditRecordsWritten),
    help: 'Audit records written to the trail (intent and outcome; file and digest records not counted).',
    registers: [registry],
  });
  const bytes = new Counter({
    name: counterName(MetricNames.auditBytesWritten),
    help: 'Bytes written to the audit trail files.',
    registers: [registry],
  });
  const sync = new Histogram({
    name: MetricNames.auditSyncDuration,
    help: 'Time of each durable write (O_DSYNC) of the audit trail: one per batch of records (group commit).',
    buckets: SYNC_BUCKETS,
    registers: [registry],
  });
  const lost = new Counter({
    name: counterName(MetricNames.auditRecordsLost),
    help: 'Audit records that could not be written; an intent lost means a write forwarded unrecorded (audit.failMode open).',
    labelNames: ['kind'],
    registers: [registry],
  });
  const refused = new Counter({
    name: counterName(MetricNames.auditWritesRefused),
    help: 'Ledger writes refused with GATEWAY_AUDIT_UNAVAILABLE because their intent record could not be written (audit.failMode closed).',
    labelNames: ['operation'],
    registers: [registry],
  });
  const failures = new Counter({
    name: counterName(MetricNames.auditWriteFailures),
    help: 'Failed writes or syncs of the audit trail file (each fails the records of its batch and those waiting).',
    registers: [registry],
  });
  const removed = new Counter({
    name: counterName(MetricNames.auditFilesRemoved),
    help: 'Trail files removed by retention (audit.retainFiles, audit.maxTrailBytes), each named first in a retention record.',
    registers: [registry],
  });
  const shortened = new Counter({
    name: counterName(MetricNames.auditRecordsShortened),
    help: 'Records written shortened (without body or request fields): reason maxRecordBytes (audit.maxRecordBytes) or callerShare (a caller over audit.callerBytesPerMinute, failMode open).',
    labelNames: ['reason'],
    registers: [registry],
  });
  const shareExceeded = new Counter({
    name: counterName(MetricNames.auditCallerShareExceeded),
    help: "Writes over their caller's share of the trail (audit.callerBytesPerMinute): refused with GATEWAY_AUDIT_SHARE_EXHAUSTED (failMode closed) or recorded with only their ids (open).",
    registers: [registry],
  });
  shortened.labels('maxRecordBytes');
  shortened.labels('callerShare');
  lost.labels('intent');
  lost.labels('outcome');
  const watch = auditGauges(registry);
  return {
    written(records, size) {
      written.inc(records);
      bytes.inc(size);
    },
    synced: (seconds) => sync.observe(seconds),
    lost: (kind) => lost.labels(kind).inc(),
    refused: (operation) => refused.labels(operationLabel(operation)).inc(),
    writeFailed: () => failures.inc(),
    filesRemoved: (files) => removed.inc(files),
    shortened: (reason) => shortened.labels(reason).inc(),
    shareExceeded: () => shareExceeded.inc(),
    watch,
  };
}

/** The audit gauges, read at scrape from what the trail gives (writable, and nothing else, before it). */
function auditGauges(registry: Registry): (trail: AuditGauges) => void {
  let trail: AuditGauges | undefined;
  const gauge = (name: string, help: string, read: (trail: AuditGauges) => number | undefined) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        const value = trail === undefined ? undefined : read(trail);
        if (value !== undefined) this.set(value);
      },
    });
  new Gauge({
    name: MetricNames.auditTrailWritable,
    help: '1 while the audit trail takes records, 0 from a write failure until a new file is begun (retried every audit.retryIntervalMs).',
    registers: [registry],
    collect() {
      this.set(trail === undefined || trail.writable() ? 1 : 0);
    },
  });
  gauge(
    MetricNames.auditPendingBytes,
    'Bytes of audit records waiting in memory to be written (bound: audit.maxPendingBytes).',
    (t) => t.pendingBytes(),
  );
  gauge(MetricNames.auditTrailBytes, "The size of the audit trail's files in its directory.", (t) => t.trailBytes());
  gauge(
    MetricNames.auditTrailMaxBytes,
    "The bound on the trail's files' size (audit.maxTrailBytes; 0: none).",
    (t) => t.maxTrailBytes,
  );
  const volumeGauge = (
    name: string,
    help: string,
    read: (volume: { freeBytes: number; sizeBytes: number }) => number,
  ) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        const volume = await trail?.volume();
        if (volume !== undefined) this.set(read(volume));
      },
    });
  volumeGauge(
    MetricNames.auditVolumeFreeBytes,
    "Bytes free on the volume holding the audit trail's directory, to its unprivileged user (statfs).",
    (volume) => volume.freeBytes,
  );
  volumeGauge(
    MetricNames.auditVolumeSizeBytes,
    "The size of the volume holding the audit trail's directory (statfs).",
    (volume) => volume.sizeBytes,
  );
  return (watched) => {
    trail = watched;
  };
}

/** The ledger policy's metrics (src/ledger-policy/): one count per decision on a call of a caller a policy names. */
export interface LedgerPolicyMetrics {
  decided(operation: string, decision: LedgerDecisionNote): void;
}

export function createLedgerPolicyMetrics(registry: Registry, exemplars: boolean): LedgerPolicyMetrics {
  // Counted in plain numbers on kept series (plain-metrics.ts), as the request metrics are: a
  // governed call decides once, and prom-client hashes the labels on every inc.
  const decisions = new PlainCounter(
    registeredCounterName(MetricNames.ledgerPolicyDecisions, exemplars),
    'Ledger policy decisions, by operation, policy, rule (default: no allow rule covered the call), decision (allow, deny; breakGlass: a break-glass principal, allowed everything) and mode (enforce; dryRun: a dry-run policy decided, nothing refused). Policy and rule names come from the configuration (capped, then other); never a party or a user.',
    ['operation', 'policy', 'rule', 'decision', 'mode'],
  );
  registerPlainMetric(registry, decisions);
  const policyLabel = boundedLabel(200);
  const ruleLabel = boundedLabel(1_000);
  const seriesOfLabels = new Map<string, CounterSeries>();
  const series = (operation: string, { policy, rule, decision, mode }: LedgerDecisionNote) => {
    const labels = [operationLabel(operation), policyLabel(policy), ruleLabel(rule), decision, mode];
    const key = JSON.stringify(labels); // names are the configuration's: any character
    let found = seriesOfLabels.get(key);
    if (found === undefined) seriesOfLabels.set(key, (found = decisions.series(...labels)));
    return found;
  };
  // A frozen note is a rule's own (ledger-policy/stage.ts decisionNote): its series found once per operation.
  const seriesOfNotes = new WeakMap<LedgerDecisionNote, Map<string, CounterSeries>>();
  // The last one counted, tried first: one rule decides most of a caller's calls of one operation.
  let last: { note: LedgerDecisionNote; operation: string; child: CounterSeries } | undefined;
  return {
    decided(operation, note) {
      if (last !== undefined && last.note === note && last.operation === operation) return last.child.inc();
      let byOperation = seriesOfNotes.get(note);
      if (byOperation === undefined) {
        if (!Object.isFrozen(note)) return series(operation, note).inc();
        seriesOfNotes.set(note, (byOperation = new Map<string, CounterSeries>()));
      }
      let child = byOperation.get(operation);
      if (child === undefined) byOperation.set(operation, (child = series(operation, note)));
      last = { note, operation, child };
      child.inc();
    },
  };
}

/** Usage per consumer (src/consumers/): registered only when consumers are configured. */
export interface ConsumerMetrics {
  /** One finished exchange of a consumer (a configured name, or `unmapped`). */
  observeConsumer(
    consumer: string,
    operation: string,
    outcome: 'success' | 'refused' | 'failed',
    seconds: number,
    requestBytes: number,
    responseBytes: number,
  ): void;
  /** A WebSocket stream's bytes each way, once its tunnel closed (its call was observed at its 101). */
  streamBytes(consumer: string, operation: string, requestBytes: number, responseBytes: number): void;
  quotaRefusal(consumer: string, operation: string, period: 'day' | 'month'): void;
  /** A call refused by a budget: `exhausted` (it would pass it) or `invalid` (its amount is not one). */
  budgetRefusal(consumer: string, operation: string, budget: string, reason: 'exhausted' | 'invalid'): void;
  upstreamTokenRequest(consumer: string, result: 'success' | 'failure'): void;
}

/** Consumer names come from the configuration (at most 1,000); past that many seen, `other`. */
const MAX_CONSUMER_LABELS = 1_001;

export function createConsumerMetrics(registry: Registry, exemplars: boolean): ConsumerMetrics {
  const counterName = (name: string) => (exemplars ? name.replace(/_total$/, '') : name);
  const counter = <L extends string>(name: string, help: string, labelNames: readonly L[]) =>
    new Counter<L>({ name: counterName(name), help, labelNames, registers: [registry] });
  const calls = counter(
    MetricNames.consumerCalls,
    "Finished calls and WebSocket upgrades by consumer (a configured name, or unmapped), operation and outcome (success, refused by the gateway, failed: the participant's error or the client gone).",
    ['consumer', 'operation', 'outcome'],
  );
  const requestBytes = counter(
    MetricNames.consumerRequestBytes,
    "Request body bytes by consumer and operation; a WebSocket stream's, the bytes its tunnel carried from the client, added when it ends.",
    ['consumer', 'operation'],
  );
  const responseBytes = counter(
    MetricNames.consumerResponseBytes,
    "Answer body bytes (as the answer declared them) by consumer and operation; a WebSocket stream's, the bytes its tunnel carried to the client, added when it ends.",
    ['consumer', 'operation'],
  );
  const duration = new Histogram({
    name: MetricNames.consumerCallDuration,
    help: 'Total time in the gateway by consumer and operation.',
    labelNames: ['consumer', 'operation'] as const,
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });
  const quotaRefusals = counter(
    MetricNames.consumerQuotaRefusals,
    'Calls refused with GATEWAY_QUOTA_EXHAUSTED, by consumer, operation and the period spent (day, month).',
    ['consumer', 'operation', 'period'],
  );
  const budgetRefusals = counter(
    MetricNames.consumerBudgetRefusals,
    'Calls refused by a budget (consumers.list[].budgets), by consumer, operation, budget and reason (exhausted: GATEWAY_BUDGET_EXHAUSTED; invalid: GATEWAY_BUDGET_AMOUNT_INVALID).',
    ['consumer', 'operation', 'budget', 'reason'],
  );
  const tokenRequests = counter(
    MetricNames.upstreamTokenRequests,
    "Requests for a consumer's brokered Canton token to its token endpoint, by consumer and result (success, failure).",
    ['consumer', 'result'],
  );
  const consumerLabel = boundedLabel(MAX_CONSUMER_LABELS);
  return {
    observeConsumer(consumer, operation, outcome, seconds, requestSize, responseSize) {
      const name = consumerLabel(consumer);
      const op = operationLabel(operation);
      calls.labels(name, op, outcome).inc();
      if (requestSize > 0) requestBytes.labels(name, op).inc(requestSize);
      if (responseSize > 0) responseBytes.labels(name, op).inc(responseSize);
      duration.labels(name, op).observe(seconds);
    },
    streamBytes(consumer, operation, requestSize, responseSize) {
      const name = consumerLabel(consumer);
      const op = operationLabel(operation);
      if (requestSize > 0) requestBytes.labels(name, op).inc(requestSize);
      if (responseSize > 0) responseBytes.labels(name, op).inc(responseSize);
    },
    quotaRefusal: (consumer, operation, period) =>
      quotaRefusals.labels(consumerLabel(consumer), operationLabel(operation), period).inc(),
    // A budget's name is one of at most 32 per consumer, from the configuration.
    budgetRefusal: (consumer, operation, budget, reason) =>
      budgetRefusals.labels(consumerLabel(consumer), operationLabel(operation), budget, reason).inc(),
    upstreamTokenRequest: (consumer, result) => tokenRequests.labels(consumerLabel(consumer), result).inc(),
  };
}
