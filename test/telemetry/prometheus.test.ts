// A real Prometheus scrapes the gateway's admin listener while each of the five operations goes
// through a success, a local refusal and a participant error; every series is then found with
// its labels through Prometheus's query API. promtool checks the exposition itself, and every
// query of the Grafana dashboard and the alert rules is run against the scraped data.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parse } from 'yaml';
import { MetricNames } from '../../src/telemetry/metrics.js';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { OPERATION_CASES, SCENARIO_HEADER, scriptedParticipant, type OperationCase } from './canton-answers.js';
import { promtool, startPrometheus, type RunningPrometheus } from './prometheus-process.js';
import { describeNeeding } from '../helpers/tool-groups.js';

const BODY_LIMIT = 4096;

let upstream: RecordingUpstream;
let gw: RunningGateway;
let prometheus: RunningPrometheus;

async function call(c: OperationCase, headers: Record<string, string>, body = c.body): Promise<Response> {
  const response = await fetch(`${gw.url}${c.path}`, {
    method: c.method,
    headers: { ...(body !== undefined && { 'content-type': 'application/json' }), ...headers },
    ...(body !== undefined && { body }),
  });
  await response.arrayBuffer();
  return response;
}

interface Series {
  readonly operation: string;
  readonly method: string;
  readonly status: string;
  readonly error_code: string;
}

const selector = (labels: Record<string, string>) =>
  `{${Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .join(',')}}`;

/** Polls Prometheus until every expression has a sample (scrapes are 1 s apart); bounded. */
async function waitForAll(expressions: readonly string[], timeoutMs = 20_000): Promise<Map<string, number>> {
  const deadline = Date.now() + timeoutMs;
  let missing = [...expressions];
  const values = new Map<string, number>();
  while (missing.length > 0) {
    const next: string[] = [];
    for (const expression of missing) {
      const result = await prometheus.query(expression);
      if (result.length > 0) values.set(expression, Number(result[0]!.value[1]));
      else next.push(expression);
    }
    missing = next;
    if (missing.length === 0) break;
    if (Date.now() > deadline) throw new Error(`not in Prometheus after ${timeoutMs} ms:\n  ${missing.join('\n  ')}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  return values;
}

describeNeeding('prometheus')('metrics scraped by a real Prometheus', () => {
  beforeAll(async () => {
    upstream = await startRecordingUpstream(scriptedParticipant);
    gw = await startGateway(upstream.url, { limits: { bodyBytes: BODY_LIMIT } });
    prometheus = await startPrometheus(new URL('/metrics', gw.adminUrl));
  }, 30_000);

  afterAll(async () => {
    await prometheus?.stop();
    await gw?.close();
    await upstream?.close();
  });

  it("has each operation's success, local refusal and participant error with the contract's labels", async () => {
    const expected: Series[] = [];
    for (const c of OPERATION_CASES) {
      // Participant error first: GET /v2/version's cache would answer a later one from memory.
      const failed = await call(c, gw.auth({ [SCENARIO_HEADER]: 'error' }));
      expect(failed.status, c.operation).toBe(c.upstreamError.status);
      expected.push({
        operation: c.operation,
        method: c.method,
        status: String(c.upstreamError.status),
        error_code: c.upstreamError.label,
      });

      const succeeded = await call(c, gw.auth());
      expect(succeeded.status, c.operation).toBe(200);
      expected.push({ operation: c.operation, method: c.method, status: '200', error_code: 'none' });

      // Refused by the gateway itself: no bearer token.
      const refused = await call(c, {});
      expect(refused.status, c.operation).toBe(401);
      expected.push({ operation: c.operation, method: c.method, status: '401', error_code: 'UNAUTHENTICATED' });

      // Refused by the gateway's request rules (policy/): labelled with the code of its answer.
      if (c.refusedBody !== undefined) {
        const ruled = await fetch(`${gw.url}${c.path}`, {
          method: c.method,
          headers: gw.auth({ 'content-type': 'application/json' }),
          body: c.refusedBody,
        });
        expect(ruled.status, c.operation).toBe(400);
        const { code } = (await ruled.json()) as { code: string };
        expect(code, c.operation).toMatch(/^[A-Z_]+$/);
        expected.push({ operation: c.operation, method: c.method, status: '400', error_code: code });
      }
    }
    // Other local refusals: a body over the limit, a route the gateway does not expose.
    const submit = OPERATION_CASES.find((c) => c.operation === 'submitAndWaitForTransaction')!;
    expect((await call(submit, gw.auth(), JSON.stringify({ padding: 'x'.repeat(BODY_LIMIT) }))).status).toBe(413);
    expected.push({
      operation: 'submitAndWaitForTransaction',
      method: 'POST',
      status: '413',
      error_code: 'GATEWAY_REQUEST_TOO_LARGE',
    });
    expect((await fetch(`${gw.url}/livez`, { headers: gw.auth() })).status).toBe(404);
    expected.push({ operation: 'unknown', method: 'GET', status: '404', error_code: 'GATEWAY_ROUTE_NOT_EXPOSED' });

    const requestSeries = expected.map((s) => `${MetricNames.requests}${selector({ ...s })}`);
    const durationSeries = expected.map(
      (s) =>
        `${MetricNames.requestDuration}_bucket${selector({ operation: s.operation, method: s.method, status: s.status, le: '60' })}`,
    );
    const upstreamSeries = OPERATION_CASES.map(
      (c) => `${MetricNames.upstreamDuration}_count${selector({ operation: c.operation })}`,
    );
    const otherSeries = [
      `${MetricNames.inflight}${selector({ operation: 'getVersion' })}`,
      `${MetricNames.authFailures}`,
      `${MetricNames.versionCache}${selector({ result: 'miss' })}`,
      `${MetricNames.buildInfo}`,
      'process_cpu_seconds_total',
      'nodejs_eventloop_lag_p99_seconds',
      `up${selector({ job: 'ledger-gateway' })} == 1`,
    ];
    const values = await waitForAll([...requestSeries, ...durationSeries, ...upstreamSeries, ...otherSeries]);

    for (const series of requestSeries) expect(values.get(series), series).toBe(1);
    // The duration histogram has no error_code: its series add up the requests of each status.
    for (const [i, series] of durationSeries.entries()) {
      const { operation, method, status } = expected[i]!;
      expect(values.get(series), series).toBe(
        expected.filter((s) => s.operation === operation && s.method === method && s.status === status).length,
      );
    }
    for (const series of upstreamSeries) expect(values.get(series), series).toBeGreaterThanOrEqual(2);
    expect(values.get(`${MetricNames.inflight}${selector({ operation: 'getVersion' })}`)).toBe(0);
    // Nothing unbounded reached a label: no raw path, no token.
    const labelValues = (await prometheus.query(`{__name__=~"ledger_gateway_.+"}`)).flatMap((r) =>
      Object.values(r.metric),
    );
    expect(labelValues.some((v) => v.includes('/v2/') || v.includes('Bearer') || v.startsWith('eyJ'))).toBe(false);
  }, 50_000);

  it('passes promtool check metrics', async () => {
    const exposition = await (await fetch(`${gw.adminUrl}/metrics`)).text();
    expect(exposition).toContain(MetricNames.requests);
    const result = await promtool(['check', 'metrics'], exposition);
    expect(result.output).toBe('');
    expect(result.code).toBe(0);
  });

  it('runs every dashboard and alert query without an error', async () => {
    const dashboard = JSON.parse(
      readFileSync(new URL('../../deploy/grafana/ledger-gateway.json', import.meta.url), 'utf8'),
    ) as { panels: Array<{ targets?: Array<{ expr: string }> }> };
    const rules = parse(readFileSync(new URL('../../deploy/prometheus/alerts.yaml', import.meta.url), 'utf8')) as {
      groups: Array<{ rules: Array<{ expr: string }> }>;
    };
    const expressions = [
      ...dashboard.panels.flatMap((panel) => panel.targets ?? []).map((target) => target.expr),
      ...rules.groups.flatMap((group) => group.rules).map((rule) => rule.expr),
    ];
    expect(expressions.length).toBeGreaterThan(10);
    for (const expression of expressions) {
      // Grafana's variables, as Grafana substitutes them.
      const concrete = expression
        .replaceAll('$__rate_interval', '1m')
        .replaceAll('$job', 'ledger-gateway')
        .replaceAll('$operation', '.*');
      await expect(prometheus.query(concrete), expression).resolves.toBeDefined();
    }
  });
});
