// The metrics contract (docs/errors-and-metrics.md "Metrics"): names, types, labels, buckets; bounded label values;
// OpenMetrics exemplars when configured; an exposition promtool accepts (prometheus.test.ts).
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { Errors } from '../../src/errors.js';
import { ErrorCodeLabels, errorCodeLabeler } from '../../src/errors.js';
import {
  DURATION_BUCKETS,
  MetricNames,
  createMetrics,
  methodLabel,
  operationLabel,
} from '../../src/telemetry/metrics.js';

interface MetricJson {
  name: string;
  type: string;
  values: Array<{ labels: Record<string, string | number>; value: number; metricName?: string }>;
}

async function metric(registry: Registry, name: string): Promise<MetricJson> {
  const found = ((await registry.getMetricsAsJSON()) as unknown as MetricJson[]).find(
    (m) => m.name === name || `${m.name}_total` === name,
  );
  if (found === undefined) throw new Error(`no metric ${name}`);
  return found;
}

describe('errorCodeLabeler', () => {
  it('labels a success none, and an error without a readable code UNRECOGNIZED_ERROR', () => {
    const label = errorCodeLabeler(100);
    expect(label(null, 200)).toBe('none');
    expect(label('none', 200)).toBe('none');
    expect(label(null, 502)).toBe('UNRECOGNIZED_ERROR');
  });

  it("keeps the gateway's codes and the fixed classifications whatever the cap", () => {
    const label = errorCodeLabeler(0);
    for (const definition of Object.values(Errors))
      expect(label(definition.code, definition.status)).toBe(definition.code);
    for (const code of [
      'DECODE_FAILURE',
      'ROUTE_NOT_FOUND',
      'PARTICIPANT_REQUEST_TIMEOUT',
      'UNRECOGNIZED_ERROR',
      'INTERNAL',
      'PERMISSION_DENIED',
      'NA',
      ErrorCodeLabels.clientClosedRequest,
    ]) {
      expect(label(code, 400)).toBe(code);
    }
  });

  it('keeps participant codes up to the cap, then counts new ones as OTHER', () => {
    const label = errorCodeLabeler(2);
    expect(label('UPDATE_NOT_FOUND', 404)).toBe('UPDATE_NOT_FOUND');
    expect(label('TOPOLOGY_SERIAL_MISMATCH', 400)).toBe('TOPOLOGY_SERIAL_MISMATCH');
    expect(label('IDP_CONFIG_NOT_FOUND', 404)).toBe('OTHER');
    expect(label('UPDATE_NOT_FOUND', 404)).toBe('UPDATE_NOT_FOUND');
    expect(label('NON_POSITIVE_OFFSET', 400)).toBe('NON_POSITIVE_OFFSET');
  });

  it('never lets a value not shaped like a Canton code through', () => {
    const label = errorCodeLabeler(100);
    for (const code of ['lower_case', '/v2/updates', 'Bearer eyJhbGciOi', 'A'.repeat(81), 'WITH SPACE', 'Ü_CODE'])
      expect(label(code, 400)).toBe('OTHER');
  });
});

describe('label values', () => {
  it('come from the route catalogue and the HTTP methods', () => {
    expect(operationLabel('getVersion')).toBe('getVersion');
    expect(operationLabel('/v2/users/alice')).toBe('unknown');
    expect(methodLabel('PATCH')).toBe('PATCH');
    expect(methodLabel('PROPFIND')).toBe('_OTHER');
  });
});

describe('createMetrics', () => {
  it("exports the contract's names, types and labels, with duration buckets reaching 60 s", async () => {
    const registry = new Registry();
    const metrics = createMetrics(registry);
    metrics.observeRequest('submitAndWaitForTransaction', 'POST', 200, null, 42);
    metrics.observeUpstream('submitAndWaitForTransaction', 41);
    metrics.authFailure('expired');
    metrics.versionCache('hit');
    metrics.jwksRefresh('https://idp.example/realms/a', 'failure');
    metrics.inflight('getVersion', 1);

    expect(await metric(registry, MetricNames.requests)).toMatchObject({
      type: 'counter',
      values: [
        {
          labels: { operation: 'submitAndWaitForTransaction', method: 'POST', status: '200', error_code: 'none' },
          value: 1,
        },
      ],
    });
    const duration = await metric(registry, MetricNames.requestDuration);
    expect(duration.type).toBe('histogram');
    const buckets = duration.values.filter((v) => v.metricName?.endsWith('_bucket')).map((v) => v.labels.le);
    expect(buckets).toEqual([...DURATION_BUCKETS, '+Inf']);
    expect(DURATION_BUCKETS.at(-1)).toBe(60);
    expect(duration.values.find((v) => v.labels.le === 60)).toMatchObject({
      value: 1,
      labels: { operation: 'submitAndWaitForTransaction', method: 'POST', status: '200' },
    });
    expect(duration.values.find((v) => v.labels.le === 30)?.value).toBe(0);
    expect((await metric(registry, MetricNames.upstreamDuration)).values[0]!.labels).toMatchObject({
      operation: 'submitAndWaitForTransaction',
    });
    expect((await metric(registry, MetricNames.authFailures)).values).toEqual([
      expect.objectContaining({ labels: { reason: 'expired' }, value: 1 }),
    ]);
    expect((await metric(registry, MetricNames.versionCache)).values).toEqual([
      expect.objectContaining({ labels: { result: 'hit' }, value: 1 }),
    ]);
    expect((await metric(registry, MetricNames.jwksRefreshes)).values).toEqual([
      expect.objectContaining({ labels: { issuer: 'https://idp.example/realms/a', result: 'failure' }, value: 1 }),
    ]);
    expect(await metric(registry, MetricNames.inflight)).toMatchObject({
      type: 'gauge',
      values: [{ labels: { operation: 'getVersion' }, value: 1 }],
    });
    expect((await metric(registry, MetricNames.buildInfo)).values[0]).toMatchObject({
      value: 1,
      labels: { version: expect.stringMatching(/^\d+\.\d+\.\d+/), node_version: process.version },
    });
    // Default process metrics, minus the *_total gauges promtool rejects.
    const names = (await registry.getMetricsAsJSON()).map((m) => m.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'process_cpu_seconds_total',
        'process_resident_memory_bytes',
        'nodejs_eventloop_lag_p99_seconds',
        'nodejs_active_handles',
      ]),
    );
    expect(names).not.toContain('nodejs_active_handles_total');
  });

  it('counts every observation on its series, children reused', async () => {
    const registry = new Registry();
    const metrics = createMetrics(registry);
    for (let i = 0; i < 1000; i++)
      metrics.observeRequest(
        'getVersion',
        'GET',
        i % 2 === 0 ? 200 : 401,
        i % 2 === 0 ? null : 'UNAUTHENTICATED',
        0.001,
      );
    for (let i = 0; i < 10; i++) metrics.inflight('getVersion', 1);
    for (let i = 0; i < 10; i++) metrics.inflight('getVersion', -1);
    const requests = await metric(registry, MetricNames.requests);
    expect(requests.values.map((v) => [v.labels.status, v.labels.error_code, v.value])).toEqual([
      ['200', 'none', 500],
      ['401', 'UNAUTHENTICATED', 500],
    ]);
    expect((await metric(registry, MetricNames.inflight)).values[0]!.value).toBe(0);
  });

  it('bounds participant codes by telemetry.metrics.maxUpstreamErrorCodes', async () => {
    const registry = new Registry();
    const metrics = createMetrics(registry, { exemplars: false, maxUpstreamErrorCodes: 1 });
    metrics.observeRequest('getUpdateByOffset', 'POST', 404, 'UPDATE_NOT_FOUND', 0.01);
    metrics.observeRequest('getUpdateByOffset', 'POST', 400, 'PARTICIPANT_PRUNED_DATA_ACCESSED', 0.01);
    metrics.observeRequest('getUpdateByOffset', 'POST', 400, 'NON_POSITIVE_OFFSET', 0.01);
    const codes = (await metric(registry, MetricNames.requests)).values.map((v) => v.labels.error_code);
    expect(codes).toEqual(['UPDATE_NOT_FOUND', 'OTHER', 'NON_POSITIVE_OFFSET']);
  });

  it('with exemplars: answers OpenMetrics, keeps the counter names, puts trace_id on the duration buckets', async () => {
    const registry = new Registry();
    const metrics = createMetrics(registry, { exemplars: true, maxUpstreamErrorCodes: 100 });
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    metrics.observeRequest('getVersion', 'GET', 200, null, 0.003, traceId);
    metrics.observeRequest('getVersion', 'GET', 200, null, 0.2); // not sampled: no exemplar
    metrics.observeUpstream('getVersion', 0.002, traceId);
    metrics.authFailure('missing');
    expect(registry.contentType).toBe(Registry.OPENMETRICS_CONTENT_TYPE);
    const text = await registry.metrics();
    expect(text).toContain(
      'ledger_gateway_requests_total{operation="getVersion",method="GET",status="200",error_code="none"} 2',
    );
    expect(text).toContain('ledger_gateway_auth_failures_total{reason="missing"} 1');
    expect(text).toMatch(
      /^ledger_gateway_request_duration_seconds_bucket\{le="0\.005",operation="getVersion",method="GET",status="200"\} 1 # \{trace_id="4bf92f3577b34da6a3ce929d0e0e4736"\} 0\.003 /m,
    );
    expect(text).toMatch(
      /^ledger_gateway_request_duration_seconds_bucket\{le="0\.25",operation="getVersion",method="GET",status="200"\} 2$/m,
    );
    expect(text).toMatch(
      /^ledger_gateway_upstream_request_duration_seconds_bucket\{le="0\.0025",operation="getVersion"\} 1 # \{trace_id="4bf92f3577b34da6a3ce929d0e0e4736"\}/m,
    );
  });
});
