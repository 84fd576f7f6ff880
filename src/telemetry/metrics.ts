// Metric names and labels: a contract documented in the README. One Registry per app.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export const MetricNames = {
  requests: 'ledger_gateway_requests_total',
  requestDuration: 'ledger_gateway_request_duration_seconds',
  upstreamDuration: 'ledger_gateway_upstream_request_duration_seconds',
  authFailures: 'ledger_gateway_auth_failures_total',
  versionCache: 'ledger_gateway_version_cache_requests_total',
  jwksRefreshes: 'ledger_gateway_jwks_refreshes_total',
  inflight: 'ledger_gateway_inflight_requests',
  buildInfo: 'ledger_gateway_build_info',
} as const;

/** submit-and-wait holds a call until the transaction commits: buckets reach 60 s. */
const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export type VersionCacheResult = 'hit' | 'miss' | 'stale' | 'coalesced';

export interface GatewayMetrics {
  readonly registry: Registry;
  observeRequest(operation: string, method: string, status: number, errorCode: string | null, seconds: number): void;
  observeUpstream(operation: string, seconds: number): void;
  authFailure(reason: string): void;
  versionCache(result: VersionCacheResult): void;
  jwksRefresh(issuer: string, result: 'success' | 'failure'): void;
  inflight(operation: string, delta: 1 | -1): void;
}

export function createMetrics(registry: Registry = new Registry()): GatewayMetrics {
  collectDefaultMetrics({ register: registry });
  const requests = new Counter({ name: MetricNames.requests, help: 'Finished requests by operation, method, status and error code (none, the gateway\'s own code, or the participant\'s).', labelNames: ['operation', 'method', 'status', 'error_code'] as const, registers: [registry] });
  const requestDuration = new Histogram({ name: MetricNames.requestDuration, help: 'Total request time in the gateway, by operation, method and status.', labelNames: ['operation', 'method', 'status'] as const, buckets: DURATION_BUCKETS, registers: [registry] });
  const upstreamDuration = new Histogram({ name: MetricNames.upstreamDuration, help: 'Time until the participant\'s answer headers, by operation.', labelNames: ['operation'] as const, buckets: DURATION_BUCKETS, registers: [registry] });
  const authFailures = new Counter({ name: MetricNames.authFailures, help: 'Refused credentials by reason.', labelNames: ['reason'] as const, registers: [registry] });
  const versionCache = new Counter({ name: MetricNames.versionCache, help: 'GET /v2/version cache lookups by result.', labelNames: ['result'] as const, registers: [registry] });
  const jwksRefreshes = new Counter({ name: MetricNames.jwksRefreshes, help: 'Key set fetches by issuer and result.', labelNames: ['issuer', 'result'] as const, registers: [registry] });
  const inflight = new Gauge({ name: MetricNames.inflight, help: 'Requests in flight by operation.', labelNames: ['operation'] as const, registers: [registry] });
  new Gauge({ name: MetricNames.buildInfo, help: 'Gateway build information; always 1.', labelNames: ['version', 'node_version'] as const, registers: [registry] })
    .set({ version: process.env.npm_package_version ?? '0.1.0', node_version: process.version }, 1);

  return {
    registry,
    observeRequest(operation, method, status, errorCode, seconds) {
      const statusLabel = String(status);
      requests.labels(operation, method, statusLabel, errorCode ?? 'none').inc();
      requestDuration.labels(operation, method, statusLabel).observe(seconds);
    },
    observeUpstream(operation, seconds) {
      upstreamDuration.labels(operation).observe(seconds);
    },
    authFailure(reason) {
      authFailures.labels(reason).inc();
    },
    versionCache(result) {
      versionCache.labels(result).inc();
    },
    jwksRefresh(issuer, result) {
      jwksRefreshes.labels(issuer, result).inc();
    },
    inflight(operation, delta) {
      inflight.labels(operation).inc(delta);
    },
  };
}
