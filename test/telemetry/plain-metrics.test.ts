// The request metrics counted in plain numbers print exactly what prom-client's own Counter and
// Histogram print for the same observations: text and JSON, Prometheus and OpenMetrics, exemplars.
import { Counter, Histogram, Registry, type RegistryContentType } from 'prom-client';
import { describe, expect, it } from 'vitest';
import {
  PlainCounter,
  PlainHistogram,
  registerPlainMetric,
  type CounterSeries,
  type HistogramSeries,
} from '../../src/telemetry/plain-metrics.js';
import { DURATION_BUCKETS } from '../../src/telemetry/metrics.js';

interface Observation {
  readonly operation: string;
  readonly status: string;
  readonly value: number;
  readonly traceId: string | undefined;
}

/** Seeded, so a failure replays. */
function observations(count: number, seed: number): Observation[] {
  let state = seed;
  const next = () => (state = (state * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
  const pick = <T>(values: readonly T[]): T => values[Math.floor(next() * values.length)]!;
  // Exactly on bounds, between them, above the last one, zero.
  const values = [...DURATION_BUCKETS, 0, 0.0004, 0.0031, 0.7, 45, 61, 1e6];
  return Array.from({ length: count }, () => ({
    operation: pick(['getVersion', 'submitAndWaitForTransaction', 'getV2StateLedger-end']),
    status: pick(['200', '400', '503']),
    value: next() < 0.5 ? pick(values) : next() * 3,
    traceId:
      next() < 0.5
        ? Math.floor(next() * 2 ** 52)
            .toString(16)
            .padStart(32, '0')
        : undefined,
  }));
}

/** Exemplar timestamps are the clock at each observation, which differs between the two by microseconds. */
const withoutTimestamps = (text: string) => text.replace(/(# \{[^}]*\} \S+) \S+$/gm, '$1 T');

async function bothWays(contentType: RegistryContentType, exemplars: boolean, counterName: string) {
  const theirs = new Registry();
  const ours = new Registry();
  // prom-client's constructor takes the content type, but its typings declare it on setContentType only.
  for (const registry of [theirs, ours]) (registry as Registry<RegistryContentType>).setContentType(contentType);
  const counter = new Counter({
    name: counterName,
    help: 'Calls.',
    labelNames: ['operation', 'status'] as const,
    registers: [theirs],
  });
  const histogram: Histogram<string> = new Histogram({
    name: 'calls_seconds',
    help: 'Call time.',
    labelNames: ['operation', 'status'] as const,
    buckets: DURATION_BUCKETS,
    enableExemplars: exemplars,
    registers: [theirs],
  });
  const plainCounter = new PlainCounter(counterName, 'Calls.', ['operation', 'status']);
  const plainHistogram = new PlainHistogram(
    'calls_seconds',
    'Call time.',
    ['operation', 'status'],
    DURATION_BUCKETS,
    exemplars,
  );
  registerPlainMetric(ours, plainCounter);
  registerPlainMetric(ours, plainHistogram);

  const counters = new Map<string, CounterSeries>();
  const histograms = new Map<string, HistogramSeries>();
  for (const { operation, status, value, traceId } of observations(2_000, exemplars ? 7 : 11)) {
    const key = `${operation} ${status}`;
    counter.labels(operation, status).inc();
    if (exemplars && traceId !== undefined)
      histogram.observe({ labels: { operation, status }, value, exemplarLabels: { trace_id: traceId } });
    else histogram.labels(operation, status).observe(value);
    if (!counters.has(key)) counters.set(key, plainCounter.series(operation, status));
    if (!histograms.has(key)) histograms.set(key, plainHistogram.series(operation, status));
    counters.get(key)!.inc();
    histograms.get(key)!.observe(value, exemplars ? traceId : undefined);
  }
  return { theirs, ours };
}

describe('plain metrics', () => {
  it('print the Prometheus text prom-client prints for the same observations', async () => {
    const { theirs, ours } = await bothWays(Registry.PROMETHEUS_CONTENT_TYPE, false, 'calls_total');
    const text = await ours.metrics();
    expect(text).toContain('calls_seconds_bucket{le="+Inf",operation=');
    expect(text).toBe(await theirs.metrics());
  });

  it('print the same OpenMetrics text, exemplars included, and the same JSON', async () => {
    const { theirs, ours } = await bothWays(Registry.OPENMETRICS_CONTENT_TYPE, true, 'calls');
    const text = await ours.metrics();
    expect(text).toMatch(/calls_seconds_bucket\{le="\+Inf",[^}]*\} \d+ # \{trace_id="[0-9a-f]{32}"\} \d+(\.\d+)? \d+/);
    expect(text).toContain('calls_total{operation=');
    expect(withoutTimestamps(text)).toBe(withoutTimestamps(await theirs.metrics()));
    const json = (registry: Registry) =>
      registry
        .getMetricsAsJSON()
        .then(
          (metrics) =>
            JSON.parse(
              withoutTimestamps(JSON.stringify(metrics).replace(/"timestamp":[\d.]+/g, '"timestamp":0')),
            ) as unknown,
        );
    expect(await json(ours)).toEqual(await json(theirs));
  });

  it('skip a value that is not a finite number instead of printing NaN forever', async () => {
    const histogram = new PlainHistogram('calls_seconds', 'Call time.', ['operation'], [1], false);
    const series = histogram.series('getVersion');
    series.observe(Number.NaN);
    series.observe(Number.POSITIVE_INFINITY);
    series.observe(0.5);
    const registry = new Registry();
    registerPlainMetric(registry, histogram);
    expect(await registry.metrics()).toContain(
      'calls_seconds_sum{operation="getVersion"} 0.5\ncalls_seconds_count{operation="getVersion"} 1',
    );
  });

  it('refuse a series with the wrong number of label values', () => {
    expect(() => new PlainCounter('calls_total', 'Calls.', ['operation', 'status']).series('getVersion')).toThrow(
      /expected 2 label values \(operation, status\), got 1/,
    );
  });
});
