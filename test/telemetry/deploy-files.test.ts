// deploy/prometheus/alerts.yaml passes promtool (syntax and its own unit tests), every alert links
// its runbook in docs/alerts.md, and the Grafana dashboard and the alerts only name metrics the
// gateway exports. (prometheus.test.ts runs every one of their queries against a real Prometheus.)
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { MetricNames } from '../../src/telemetry/metrics.js';
import { promtool } from './prometheus-process.js';
import { itNeeding } from '../helpers/tool-groups.js';

const path = (relative: string) => fileURLToPath(new URL(`../../deploy/${relative}`, import.meta.url));

/** The placeholder base of every runbook_url (deploy/kubernetes/components/monitoring replaces it). */
const RUNBOOK_BASE_URL = 'https://ledger-gateway.example/docs/alerts.md';

interface Panel {
  readonly type: string;
  readonly title: string;
  readonly targets?: Array<{ expr: string }>;
}

const dashboard = JSON.parse(readFileSync(path('grafana/ledger-gateway.json'), 'utf8')) as {
  uid: string;
  panels: Panel[];
  templating: { list: Array<{ name: string }> };
};
const rules = parse(readFileSync(path('prometheus/alerts.yaml'), 'utf8')) as {
  groups: Array<{ rules: Array<{ alert: string; expr: string; annotations?: Record<string, string> }> }>;
};
const alertsDoc = readFileSync(fileURLToPath(new URL('../../docs/alerts.md', import.meta.url)), 'utf8');

/** The metrics the observability contract names (issue 5); the dashboard shows every one. */
const CONTRACT = [
  MetricNames.requests,
  MetricNames.requestDuration,
  MetricNames.upstreamDuration,
  MetricNames.authFailures,
  MetricNames.versionCache,
  MetricNames.jwksRefreshes,
  MetricNames.inflight,
];

/** Histogram series names stand for their metric. */
const EXPORTED = new Set<string>([
  ...Object.values(MetricNames),
  ...[MetricNames.requestDuration, MetricNames.upstreamDuration].flatMap((name) => [
    `${name}_bucket`,
    `${name}_sum`,
    `${name}_count`,
  ]),
  'process_cpu_seconds_total',
  'process_resident_memory_bytes',
  'nodejs_eventloop_lag_p99_seconds',
  'up',
]);

/** The anchor GitHub (and GitLab, MkDocs) gives a heading: lower case, punctuation dropped, spaces to hyphens. */
function headingAnchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function metricNames(expression: string): string[] {
  const withoutStrings = expression.replace(/"[^"]*"/g, '""');
  return [...withoutStrings.matchAll(/\b([a-z_][a-z0-9_]*)\s*(?:\{|\[)/g)]
    .map((match) => match[1]!)
    .filter((name) => !['by', 'without', 'on', 'ignoring'].includes(name));
}

describe('deploy/prometheus/alerts.yaml', () => {
  itNeeding('promtool', 'passes promtool check rules', async () => {
    const result = await promtool(['check', 'rules', path('prometheus/alerts.yaml')]);
    expect(result.output).toContain('SUCCESS');
    expect(result.code).toBe(0);
  });

  itNeeding('promtool', 'passes its unit tests (promtool test rules)', async () => {
    const result = await promtool(['test', 'rules', path('prometheus/alerts.test.yaml')]);
    expect(result.output).toContain('SUCCESS');
    expect(result.code).toBe(0);
  });

  it('alerts on error ratio, latency, an unavailable participant and failing JWKS refreshes', () => {
    const alerts = rules.groups.flatMap((group) => group.rules).map((rule) => rule.alert);
    expect(alerts).toEqual(
      expect.arrayContaining([
        'LedgerGatewayHighErrorRatio',
        'LedgerGatewayHighLatency',
        'LedgerGatewayUpstreamUnavailable',
        'LedgerGatewayJwksRefreshFailing',
      ]),
    );
  });

  it('alerts on readiness, replicas, failovers, dropped log lines, authentication failures, refused connections, an unwritable audit trail and its volume filling, a break-glass use, traffic or not', () => {
    const byName = new Map(rules.groups.flatMap((group) => group.rules).map((rule) => [rule.alert, rule.expr]));
    const expected: Array<[string, string]> = [
      ['LedgerGatewayNotReady', MetricNames.ready],
      ['LedgerGatewayNoActiveReplica', MetricNames.upstreamReplicaUp],
      ['LedgerGatewayUpstreamFailover', MetricNames.upstreamFailovers],
      ['LedgerGatewayLogLinesDropped', MetricNames.logLinesDropped],
      ['LedgerGatewayAuthFailureSpike', MetricNames.authFailures],
      ['LedgerGatewayConnectionsRefused', MetricNames.connectionsRefused],
      ['LedgerGatewayAuditTrailUnwritable', MetricNames.auditTrailWritable],
      ['LedgerGatewayAuditTrailUnwritable', MetricNames.auditRecordsLost],
      ['LedgerGatewayAuditVolumeLow', MetricNames.auditVolumeFreeBytes],
      ['LedgerGatewayAuditVolumeLow', MetricNames.auditVolumeSizeBytes],
      ['LedgerGatewayLedgerPolicyBreakGlassUsed', MetricNames.ledgerPolicyDecisions],
    ];
    for (const [alert, metric] of expected) expect(byName.get(alert), alert).toContain(metric);
    // Readiness and replicas are judged on gauges alone, so that an idle gateway's outage fires too.
    expect(byName.get('LedgerGatewayNoActiveReplica')).not.toContain('requests_total');
    expect(byName.get('LedgerGatewayNotReady')).not.toContain('requests_total');
  });

  it("alerts when the gateway's metrics are absent from Prometheus, for the job the shipped monitors set", () => {
    const absent = rules.groups.flatMap((group) => group.rules).filter((rule) => /^\s*absent\(/.test(rule.expr));
    expect(absent.map((rule) => rule.alert)).toEqual(['LedgerGatewayMetricsAbsent']);
    expect(absent[0]!.expr).toMatch(new RegExp(`absent\\(${MetricNames.buildInfo}\\{job="ledger-gateway"\\}\\)`));
  });

  it('links every alert to its runbook: a section of docs/alerts.md named after the alert', () => {
    const anchors = new Set([...alertsDoc.matchAll(/^#{2,3} (.+)$/gm)].map((match) => headingAnchor(match[1]!)));
    const alerts = rules.groups.flatMap((group) => group.rules).filter((rule) => rule.alert !== undefined);
    expect(alerts.length).toBeGreaterThan(0);
    for (const rule of alerts) {
      expect(rule.annotations?.runbook_url, rule.alert).toBe(`${RUNBOOK_BASE_URL}#${rule.alert.toLowerCase()}`);
      expect(anchors.has(rule.alert.toLowerCase()), `docs/alerts.md has a section ${rule.alert}`).toBe(true);
    }
    // No runbook for an alert that no longer exists.
    const documented = [...alertsDoc.matchAll(/^## (LedgerGateway\w+)$/gm)].map((match) => match[1]);
    expect(documented.sort()).toEqual(alerts.map((rule) => rule.alert).sort());
  });
});

describe('deploy/grafana/ledger-gateway.json', () => {
  const expressions = dashboard.panels.flatMap((panel) => panel.targets ?? []).map((target) => target.expr);

  it('queries only metrics the gateway exports', () => {
    const used = new Set(
      [...expressions, ...rules.groups.flatMap((g) => g.rules).map((r) => r.expr)].flatMap(metricNames),
    );
    expect([...used].filter((name) => !EXPORTED.has(name))).toEqual([]);
  });

  it('shows request rate, error ratio by operation and code, latency quantiles, upstream vs gateway time, auth failures, cache hit ratio', () => {
    const titles = dashboard.panels.map((panel) => panel.title);
    for (const title of [
      'Request rate by operation',
      'Error ratio by operation',
      'Errors by operation and error code',
      'p99 latency by operation',
      'Upstream vs gateway time (mean per request)',
      'Authentication failures by reason',
      'GET /v2/version cache hit ratio',
    ]) {
      expect(titles).toContain(title);
    }
    const all = expressions.join('\n');
    for (const name of CONTRACT) expect(all, name).toContain(name);
    expect(all).toContain('histogram_quantile(0.99');
    expect(dashboard.templating.list.map((variable) => variable.name)).toEqual([
      'datasource',
      'namespace',
      'job',
      'instance',
      'operation',
    ]);
    // Every query is narrowed to the chosen namespaces, jobs and pods.
    for (const expression of expressions) {
      for (const selector of ['job=~"$job"', 'namespace=~"$namespace"', 'instance=~"$instance"']) {
        expect(expression, expression).toContain(selector);
      }
    }
  });

  it('shows readiness by check, open WebSocket streams, signature checks and dropped log lines per pod', () => {
    const panels = new Map(
      dashboard.panels.map((panel) => [panel.title, (panel.targets ?? []).map((target) => target.expr).join('\n')]),
    );
    const expected: Array<[string, RegExp]> = [
      ['Readiness by check', new RegExp(`by \\(instance, check\\) \\(${MetricNames.ready}\\{`)],
      ['Open WebSocket streams', new RegExp(`by \\(instance\\) \\(${MetricNames.webSocketStreamsOpen}\\{`)],
      [
        'Token signature checks per second',
        new RegExp(`by \\(instance\\) \\(rate\\(${MetricNames.tokenSignatureChecks}\\{`),
      ],
      ['Dropped log lines per second', new RegExp(`by \\(instance\\) \\(rate\\(${MetricNames.logLinesDropped}\\{`)],
      ['Participant replicas up', new RegExp(`by \\(instance, replica\\) \\(${MetricNames.upstreamReplicaUp}\\{`)],
      ['Failovers', new RegExp(`by \\(instance\\) \\(increase\\(${MetricNames.upstreamFailovers}\\{`)],
      ['Client connections open', new RegExp(`by \\(instance\\) \\(${MetricNames.connectionsOpen}\\{`)],
      [
        'Connections refused at accept',
        new RegExp(`by \\(instance, limit\\) \\(rate\\(${MetricNames.connectionsRefused}\\{`),
      ],
      [
        'WebSocket stream ends by cause',
        new RegExp(`by \\(ended_by\\) \\(rate\\(${MetricNames.webSocketStreamsEnded}\\{`),
      ],
    ];
    for (const [title, query] of expected) expect(panels.get(title), title).toMatch(query);
  });
});
