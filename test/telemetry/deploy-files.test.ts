// deploy/prometheus/alerts.yaml passes promtool (syntax and its own unit tests), and the Grafana
// dashboard and the alerts only name metrics the gateway exports. (prometheus.test.ts runs every
// one of their queries against a real Prometheus.)
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { MetricNames } from '../../src/telemetry/metrics.js';
import { promtool } from './prometheus-process.js';

const path = (relative: string) => fileURLToPath(new URL(`../../deploy/${relative}`, import.meta.url));

interface Panel {
  readonly type: string;
  readonly title: string;
  readonly targets?: Array<{ expr: string }>;
}

const dashboard = JSON.parse(readFileSync(path('grafana/ledger-gateway.json'), 'utf8')) as { uid: string; panels: Panel[]; templating: { list: Array<{ name: string }> } };
const rules = parse(readFileSync(path('prometheus/alerts.yaml'), 'utf8')) as { groups: Array<{ rules: Array<{ alert: string; expr: string }> }> };

/** The metrics the observability contract names (issue 5); the dashboard shows every one. */
const CONTRACT = [MetricNames.requests, MetricNames.requestDuration, MetricNames.upstreamDuration, MetricNames.authFailures, MetricNames.versionCache, MetricNames.jwksRefreshes, MetricNames.inflight];

/** Histogram series names stand for their metric. */
const EXPORTED = new Set<string>([
  ...Object.values(MetricNames),
  ...[MetricNames.requestDuration, MetricNames.upstreamDuration].flatMap((name) => [`${name}_bucket`, `${name}_sum`, `${name}_count`]),
  'process_cpu_seconds_total',
  'process_resident_memory_bytes',
  'nodejs_eventloop_lag_p99_seconds',
  'up',
]);

function metricNames(expression: string): string[] {
  const withoutStrings = expression.replace(/"[^"]*"/g, '""');
  return [...withoutStrings.matchAll(/\b([a-z_][a-z0-9_]*)\s*(?:\{|\[)/g)].map((match) => match[1]!).filter((name) => !['by', 'without', 'on', 'ignoring'].includes(name));
}

describe('deploy/prometheus/alerts.yaml', () => {
  it('passes promtool check rules', async () => {
    const result = await promtool(['check', 'rules', path('prometheus/alerts.yaml')]);
    expect(result.output).toContain('SUCCESS');
    expect(result.code).toBe(0);
  });

  it('passes its unit tests (promtool test rules)', async () => {
    const result = await promtool(['test', 'rules', path('prometheus/alerts.test.yaml')]);
    expect(result.output).toContain('SUCCESS');
    expect(result.code).toBe(0);
  });

  it('alerts on error ratio, latency, an unavailable participant and failing JWKS refreshes', () => {
    const alerts = rules.groups.flatMap((group) => group.rules).map((rule) => rule.alert);
    expect(alerts).toEqual(expect.arrayContaining(['LedgerGatewayHighErrorRatio', 'LedgerGatewayHighLatency', 'LedgerGatewayUpstreamUnavailable', 'LedgerGatewayJwksRefreshFailing']));
  });
});

describe('deploy/grafana/ledger-gateway.json', () => {
  const expressions = dashboard.panels.flatMap((panel) => panel.targets ?? []).map((target) => target.expr);

  it('queries only metrics the gateway exports', () => {
    const used = new Set([...expressions, ...rules.groups.flatMap((g) => g.rules).map((r) => r.expr)].flatMap(metricNames));
    expect([...used].filter((name) => !EXPORTED.has(name))).toEqual([]);
  });

  it('shows request rate, error ratio by operation and code, latency quantiles, upstream vs gateway time, auth failures, cache hit ratio', () => {
    const titles = dashboard.panels.map((panel) => panel.title);
    for (const title of ['Request rate by operation', 'Error ratio by operation', 'Errors by operation and error code', 'p99 latency by operation', 'Upstream vs gateway time (mean per request)', 'Authentication failures by reason', 'GET /v2/version cache hit ratio']) {
      expect(titles).toContain(title);
    }
    const all = expressions.join('\n');
    for (const name of CONTRACT) expect(all, name).toContain(name);
    expect(all).toContain('histogram_quantile(0.99');
    expect(dashboard.templating.list.map((variable) => variable.name)).toEqual(['datasource', 'job', 'operation']);
  });
});
