// Metric names and labels: a contract documented in docs/errors-and-metrics.md. One Registry per app.
// Every label value comes from a bounded set: the route catalogue, the error catalogue, codes
// that match Canton's code pattern (capped), a status number. Never a raw URL, a user or a token.
import { Counter, Gauge, Registry, collectDefaultMetrics, type RegistryContentType } from 'prom-client';
import { errorCodeLabeler } from '../error-codes.js';
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
  inflight: 'ledger_gateway_inflight_requests',
  buildInfo: 'ledger_gateway_build_info',
  protectionRefusals: 'ledger_gateway_protection_refusals_total',
  protectionStoreFailures: 'ledger_gateway_protection_store_failures_total',
  protectionStoreUp: 'ledger_gateway_protection_store_up',
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
  bodyBufferBytes: 'ledger_gateway_body_buffer_bytes',
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
  inflight(operation: string, delta: 1 | -1): void;
  /** A call refused by a protection limit (`limit`: a LimitName of protection/store.ts). */
  protectionRefusal(operation: string, limit: string): void;
  /** The shared limit store (Redis) could not answer; `failMode` says what the call got. */
  protectionStoreFailure(failMode: 'open' | 'closed'): void;
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
  /** A WebSocket tunnel closed; `endedBy`: client, participant, idle_timeout or shutdown. */
  webSocketStreamEnded(operation: string, endedBy: string): void;
  /** A client connection closed as it was accepted, over protection.connections' `limit`. */
  connectionRefused(limit: 'total' | 'perAddress'): void;
  /** Where ledger_gateway_connections_open reads the API listener's open client connections (at scrape). */
  watchConnections(open: () => number): void;
  /** Where the replica gauge and the failover counter read the upstream replicas (at scrape). */
  watchReplicas(replicas: ReplicaReport): void;
  /** Where ledger_gateway_body_buffer_bytes reads the request bodies held in memory (at scrape). */
  watchBodyBuffer(heldBytes: () => number): void;
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

export function createMetrics(
  registry: Registry = new Registry(),
  options: MetricsOptions = DEFAULT_METRICS_OPTIONS,
): GatewayMetrics {
  const exemplars = options.exemplars;
  // Exemplars exist only in the OpenMetrics format; prom-client then appends _total to counters itself.
  if (exemplars) (registry as Registry<RegistryContentType>).setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
  const counterName = (name: string) => (exemplars ? name.replace(/_total$/, '') : name);

  collectDefaultMetrics({ register: registry });
  for (const name of LINT_FAILING_DEFAULT_METRICS) registry.removeSingleMetric(name);

  // Updated by every request: counted in plain numbers (plain-metrics.ts), printed by the registry.
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
    exemplars,
  );
  const upstreamDuration = new PlainHistogram(
    MetricNames.upstreamDuration,
    "Time until the participant's answer headers, by operation.",
    ['operation'],
    DURATION_BUCKETS,
    exemplars,
  );
  for (const metric of [requests, requestDuration, upstreamDuration]) registerPlainMetric(registry, metric);
  const authFailures = new Counter({
    name: counterName(MetricNames.authFailures),
    help: 'Refused credentials by reason.',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  // Counted on every cached answer: plain numbers too (a prom-client child's inc looked its series up by a string key each time).
  const versionCache = new PlainCounter(
    counterName(MetricNames.versionCache),
    'GET /v2/version cache lookups by result.',
    ['result'],
  );
  registerPlainMetric(registry, versionCache);
  const jwksRefreshes = new Counter({
    name: counterName(MetricNames.jwksRefreshes),
    help: 'Key set fetches by issuer and result.',
    labelNames: ['issuer', 'result'] as const,
    registers: [registry],
  });
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
  new Gauge({
    name: MetricNames.buildInfo,
    help: 'Gateway build information; always 1.',
    labelNames: ['version', 'node_version'] as const,
    registers: [registry],
  }).set({ version: BUILD_VERSION, node_version: process.version }, 1);

  const errorCodeLabel = errorCodeLabeler(options.maxUpstreamErrorCodes);
  const reasonLabel = boundedLabel(50);
  const issuerLabel = boundedLabel(50);

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
  const protectionRefusals = new Counter({
    name: counterName(MetricNames.protectionRefusals),
    help: 'Calls refused by a protection limit, by operation and limit (a LimitName of protection/store.ts).',
    labelNames: ['operation', 'limit'] as const,
    registers: [registry],
  });
  const protectionStoreFailures = new Counter({
    name: counterName(MetricNames.protectionStoreFailures),
    help: 'Admissions the shared limit store (Redis) could not answer, by the fail mode applied (open: admitted unchecked, closed: refused).',
    labelNames: ['fail_mode'] as const,
    registers: [registry],
  });
  /** A counter that reports, at each scrape, how far a count kept elsewhere has grown. */
  const countedElsewhere = (name: string, help: string, read: () => number) => {
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
  };
  let signatureChecks = () => 0;
  countedElsewhere(
    MetricNames.tokenSignatureChecks,
    'Token signature verifications; a verified-token cache hit costs none, so this grows with new tokens, not with calls.',
    () => signatureChecks(),
  );
  countedElsewhere(
    MetricNames.logLinesDropped,
    'Log lines dropped because stdout did not take them and 16 MiB of lines were already waiting for it.',
    droppedLogLines,
  );
  let protectionStoreReady = () => true;
  new Gauge({
    name: MetricNames.protectionStoreUp,
    help: '1 while the limit store answers (always, in memory); 0 while Redis is unreachable and protection.failMode applies.',
    registers: [registry],
    collect() {
      this.set(protectionStoreReady() ? 1 : 0);
    },
  });
  let upstreamLoad = () => ({ inFlight: 0, queued: 0 });
  new Gauge({
    name: MetricNames.upstreamCallsInFlight,
    help: "Calls handed to the participant's connection pool, at most upstream.connections (version fetches included).",
    registers: [registry],
    collect() {
      this.set(upstreamLoad().inFlight);
    },
  });
  new Gauge({
    name: MetricNames.upstreamCallsQueued,
    help: 'Calls waiting in the gateway for a free upstream connection (every one of upstream.connections busy); each waits at most its timeout, then gets 503.',
    registers: [registry],
    collect() {
      this.set(upstreamLoad().queued);
    },
  });
  let openStreams = () => 0;
  const streamsEnded = new Counter({
    name: counterName(MetricNames.webSocketStreamsEnded),
    help:
      'WebSocket streams closed, by operation and by what ended them ' +
      '(client, participant, idle_timeout, shutdown, replica_changed).',
    labelNames: ['operation', 'ended_by'] as const,
    registers: [registry],
  });
  new Gauge({
    name: MetricNames.webSocketStreamsOpen,
    help: 'WebSocket streams tunnelled to the participant and still open (each also holds a protection slot).',
    registers: [registry],
    collect() {
      this.set(openStreams());
    },
  });
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
  let openConnections = () => 0;
  new Gauge({
    name: MetricNames.connectionsOpen,
    help: 'Client connections open on the API listener (WebSocket streams included).',
    registers: [registry],
    collect() {
      this.set(openConnections());
    },
  });
  let bodyBufferBytes = () => 0;
  new Gauge({
    name: MetricNames.bodyBufferBytes,
    help: 'Bytes of request bodies held in memory, against limits.bufferedBodyBytes.',
    registers: [registry],
    collect() {
      this.set(bodyBufferBytes());
    },
  });
  const connectionsRefused = new Counter({
    name: counterName(MetricNames.connectionsRefused),
    help: 'Client connections closed as they were accepted, by the cap they were over (total, perAddress).',
    labelNames: ['limit'] as const,
    registers: [registry],
  });
  const refusalSeries = memo<CounterChild>((key) => {
    const space = key.indexOf(' ');
    return protectionRefusals.labels(key.slice(0, space), key.slice(space + 1));
  });
  const authSeries = memo<CounterChild>((reason) => authFailures.labels(reason));
  const cacheSeries = memo<CounterSeries>((result) => versionCache.series(result));
  const jwksSeries = memo<CounterChild>((key) => {
    const space = key.lastIndexOf(' ');
    return jwksRefreshes.labels(key.slice(0, space), key.slice(space + 1));
  });

  return {
    registry,
    exemplars,
    observeRequest(operation, method, status, errorCode, seconds, traceId) {
      const series = requestSeries(operationLabel(operation), method, status, errorCodeLabel(errorCode, status));
      series.count.inc();
      series.duration.observe(seconds, traceId);
    },
    observeUpstream(operation, seconds, traceId) {
      upstreamSeries(operationLabel(operation)).observe(seconds, traceId);
    },
    authFailure(reason) {
      authSeries(reasonLabel(reason)).inc();
    },
    versionCache(result) {
      cacheSeries(result).inc();
    },
    jwksRefresh(issuer, result) {
      jwksSeries(`${issuerLabel(issuer)} ${result}`).inc();
    },
    inflight(operation, delta) {
      const label = operationLabel(operation);
      inflightCounts.set(label, (inflightCounts.get(label) ?? 0) + delta);
    },
    protectionRefusal(operation, limit) {
      refusalSeries(`${operationLabel(operation)} ${limit}`).inc();
    },
    protectionStoreFailure(failMode) {
      protectionStoreFailures.labels(failMode).inc();
    },
    watchProtectionStore(ready) {
      protectionStoreReady = ready;
    },
    watchSignatureChecks(count) {
      signatureChecks = count;
    },
    watchUpstream(load) {
      upstreamLoad = load;
    },
    watchWebSocketStreams(open) {
      openStreams = open;
    },
    watchReadiness(checks) {
      readinessChecks = checks;
    },
    webSocketStreamEnded(operation, endedBy) {
      streamsEnded.labels(operationLabel(operation), endedBy).inc();
    },
    connectionRefused(limit) {
      connectionsRefused.labels(limit).inc();
    },
    watchConnections(open) {
      openConnections = open;
    },
    watchReplicas(report) {
      replicas = report;
    },
    watchBodyBuffer(heldBytes) {
      bodyBufferBytes = heldBytes;
    },
  };
}
