// The metrics every request updates (requests_total and the two duration histograms), counted in
// plain numbers on the request path and read by prom-client's registry when it is scraped. A
// prom-client child validates and hashes its labels and looks its bucket up by a float-named key on
// every observation (kept for the CPU it saves against prom-client's children, paired in docs/performance.md).
// Here an observation is a few number writes on a series the caller keeps. The registry formats
// these objects exactly as its own Counter and Histogram (plain-metrics.test.ts compares the text,
// exemplars included); written here because prom-client has no way to add to a histogram but one
// observation at a time.
import type { Metric, Registry } from 'prom-client';

type Labels = Readonly<Record<string, string>>;

/** The label set of a new series: `values` in the order of `names` (as prom-client's labels()). */
function labelsOf(names: readonly string[], values: readonly string[]): Labels {
  if (values.length !== names.length)
    throw new Error(`expected ${names.length} label values (${names.join(', ')}), got ${values.length}`);
  return Object.freeze(Object.fromEntries(names.map((name, index) => [name, values[index]!])));
}

/** An OpenMetrics exemplar, as prom-client's registry prints it. */
interface Exemplar {
  readonly labelSet: Labels;
  readonly value: number;
  readonly timestamp: number;
}

/** One exposition line, in the shape of prom-client's own metric values. */
interface ExpositionValue {
  readonly value: number;
  readonly labels: Readonly<Record<string, string | number>>;
  readonly metricName?: string;
  readonly sharedLabels?: Labels;
  readonly exemplar?: Exemplar | null;
}

interface MetricData {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'histogram';
  readonly values: ExpositionValue[];
  readonly aggregator: 'sum';
}

export class CounterSeries {
  value = 0;

  constructor(readonly labels: Labels) {}

  inc(): void {
    this.value += 1;
  }
}

/** A counter whose series are made once and kept by the caller. */
export class PlainCounter {
  readonly type = 'counter';
  readonly aggregator = 'sum';
  readonly #series: CounterSeries[] = [];

  /** `name` is not readonly: in OpenMetrics the registry strips `_total` from a counter's name and prints it on each value. */
  constructor(
    public name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
  ) {}

  /** A new series with these label values, in the order of labelNames; the caller keeps it. */
  series(...values: string[]): CounterSeries {
    const series = new CounterSeries(labelsOf(this.labelNames, values));
    this.#series.push(series);
    return series;
  }

  async get(): Promise<MetricData> {
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      values: this.#series.map(({ value, labels }) => ({ value, labels })),
      aggregator: this.aggregator,
    };
  }

  reset(): void {
    for (const series of this.#series) series.value = 0;
  }
}

export class HistogramSeries {
  /** Observations per bucket, not cumulative; the last one counts those above every bound. */
  readonly counts: Float64Array;
  readonly exemplars: (Exemplar | null)[] | undefined;
  sum = 0;
  count = 0;

  constructor(
    readonly labels: Labels,
    private readonly bounds: readonly number[],
    exemplars: boolean,
  ) {
    this.counts = new Float64Array(bounds.length + 1);
    this.exemplars = exemplars ? new Array<Exemplar | null>(bounds.length + 1).fill(null) : undefined;
  }

  /** `traceId` becomes the bucket's exemplar when the histogram keeps exemplars. */
  observe(value: number, traceId?: string): void {
    if (!Number.isFinite(value)) return;
    const bounds = this.bounds;
    let bucket = 0;
    while (bucket < bounds.length && value > bounds[bucket]!) bucket++;
    this.counts[bucket]! += 1;
    this.sum += value;
    this.count += 1;
    if (this.exemplars !== undefined && traceId !== undefined) {
      this.exemplars[bucket] = { labelSet: { trace_id: traceId }, value, timestamp: Date.now() / 1000 };
    }
  }

  reset(): void {
    this.counts.fill(0);
    this.exemplars?.fill(null);
    this.sum = 0;
    this.count = 0;
  }
}

/** A histogram whose series are made once and kept by the caller. */
export class PlainHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly #series: HistogramSeries[] = [];

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
    readonly bounds: readonly number[],
    readonly exemplars: boolean,
  ) {}

  /** A new series with these label values, in the order of labelNames (printed after `le`); the caller keeps it. */
  series(...values: string[]): HistogramSeries {
    const series = new HistogramSeries(labelsOf(this.labelNames, values), this.bounds, this.exemplars);
    this.#series.push(series);
    return series;
  }

  /** What the registry prints: `le` first, the series' labels shared by its lines (as prom-client's Histogram). */
  async getForPromString(): Promise<MetricData> {
    const bucketName = `${this.name}_bucket`;
    const values: ExpositionValue[] = [];
    for (const series of this.#series) {
      const shared = series.labels;
      let cumulative = 0;
      this.bounds.forEach((bound, index) => {
        cumulative += series.counts[index]!;
        values.push({
          labels: { le: bound },
          sharedLabels: shared,
          value: cumulative,
          metricName: bucketName,
          exemplar: series.exemplars?.[index] ?? null,
        });
      });
      values.push(
        {
          labels: { le: '+Inf' },
          sharedLabels: shared,
          value: series.count,
          metricName: bucketName,
          exemplar: series.exemplars?.[this.bounds.length] ?? null,
        },
        { labels: {}, sharedLabels: shared, value: series.sum, metricName: `${this.name}_sum` },
        { labels: {}, sharedLabels: shared, value: series.count, metricName: `${this.name}_count` },
      );
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** The same values with each line's labels whole (prom-client's get()). */
  async get(): Promise<MetricData> {
    const data = await this.getForPromString();
    return {
      ...data,
      values: data.values.map(({ sharedLabels, labels, ...value }) => ({
        ...value,
        labels: { ...labels, ...sharedLabels },
      })),
    };
  }

  reset(): void {
    for (const series of this.#series) series.reset();
  }
}

/** Registers a plain metric: the registry reads it as it reads its own (get, getForPromString, reset). */
export function registerPlainMetric(registry: Registry, metric: PlainCounter | PlainHistogram): void {
  registry.registerMetric(metric as unknown as Metric);
}
