// Usage per consumer and operation: every finished exchange of a gateway with consumers is counted
// in metrics (calls by outcome, bytes, latency; the consumer label is a configured name or
// `unmapped`) and in a report by UTC day (GET /usage on the admin listener). In Redis the report's
// counts are added up from every replica (each flushes its counts every second); in memory they
// are this replica's since it started, as the report says.
import { Errors } from '../errors.js';
import type { EndedStream, Exchange } from '../exchange/exchange.js';
import { bytesOf } from '../telemetry/access-log.js';
import type { ConsumerMetrics } from '../telemetry/metrics.js';
import { UNMAPPED } from './config.js';
import type { RedisClient } from './key-redis.js';
import { periodsAt } from './periods.js';

const COUNTS = ['calls', 'refused', 'failed', 'requestBytes', 'responseBytes', 'durationMs'] as const;
type Count = (typeof COUNTS)[number];

export interface UsageRow extends Record<Count, number> {
  readonly day: string;
  readonly consumer: string;
  readonly operation: string;
}

export interface UsageReport {
  /** redis: every replica's counts (flushed each second); memory: this replica's since it started. */
  readonly source: 'redis' | 'memory';
  readonly scope: string;
  readonly from: string;
  readonly to: string;
  readonly rows: readonly UsageRow[];
}

export interface UsageLedger {
  /** Counts one finished exchange of `consumer` (a configured name, or unmapped). */
  observe(exchange: Exchange, consumer: string, status: number, code: string, seconds: number): void;
  /** Adds the bytes a WebSocket stream of `consumer` carried each way, once its tunnel closed (its call counted at its 101). */
  observeStream(exchange: Exchange, consumer: string, stream: EndedStream): void;
  /** The days from `from` to `to` (YYYY-MM-DD, inclusive). */
  report(from: string, to: string): Promise<UsageReport>;
  close(): Promise<void>;
}

const GATEWAY_CODES: ReadonlySet<string> = new Set(Object.values(Errors).map((definition) => definition.code));
/** How long a day's counts are kept (memory and Redis). */
const RETAIN_DAYS = 400;
const FLUSH_INTERVAL_MS = 1_000;

export type Outcome = 'success' | 'refused' | 'failed';

/** success below 400 (a 101 included); refused: the gateway's own refusal; failed: the participant's error, a client gone. */
export function outcomeOf(status: number, code: string): Outcome {
  if (status < 400) return 'success';
  return GATEWAY_CODES.has(code) ? 'refused' : 'failed';
}

function requestBytesOf(exchange: Exchange): number {
  return bytesOf(exchange.raw.headers['content-length']) ?? (exchange as { rawBody?: Buffer }).rawBody?.length ?? 0;
}

/** Rows keyed `day consumer operation`, each a set of counts. */
type Table = Map<string, Record<Count, number>>;

function addTo(table: Table, key: string, counts: Partial<Record<Count, number>>): void {
  let row = table.get(key);
  if (row === undefined)
    table.set(key, (row = { calls: 0, refused: 0, failed: 0, requestBytes: 0, responseBytes: 0, durationMs: 0 }));
  for (const [name, value] of Object.entries(counts) as Array<[Count, number]>) row[name] += value;
}

function rowsOf(table: Table, from: string, to: string): UsageRow[] {
  const rows: UsageRow[] = [];
  for (const [key, counts] of table) {
    const [day, consumer, operation] = key.split(' ') as [string, string, string];
    if (day >= from && day <= to) rows.push({ day, consumer, operation, ...counts });
  }
  return rows.sort((a, b) =>
    `${a.day} ${a.consumer} ${a.operation}`.localeCompare(`${b.day} ${b.consumer} ${b.operation}`),
  );
}

/** Drops the days past RETAIN_DAYS. */
function prune(table: Table, at: number): void {
  const oldest = new Date(at - RETAIN_DAYS * 86_400_000).toISOString().slice(0, 10);
  for (const key of table.keys()) if (key.slice(0, 10) < oldest) table.delete(key);
}

export function createUsageLedger(
  metrics: ConsumerMetrics,
  redis: { client: RedisClient; prefix: string } | undefined,
): UsageLedger {
  const kept: Table = new Map(); // memory: the report; Redis: the counts not yet flushed
  let lastPrune = 0;
  const flush = redis === undefined ? undefined : redisFlusher(redis.client, redis.prefix, kept);
  const timer = flush === undefined ? undefined : setInterval(() => void flush(), FLUSH_INTERVAL_MS);
  timer?.unref();
  return {
    observe(exchange, consumer, status, code, seconds) {
      const operation = exchange.operation?.name ?? 'unknown';
      const outcome = outcomeOf(status, code);
      const requestBytes = requestBytesOf(exchange);
      const answered = exchange.kind === 'call' ? (bytesOf(exchange.answerContentLength) ?? 0) : 0;
      metrics.observeConsumer(consumer, operation, outcome, seconds, requestBytes, answered);
      const at = Date.now();
      const day = periodsAt(at).day.id;
      addTo(kept, `${day} ${consumer} ${operation}`, {
        calls: 1,
        refused: outcome === 'refused' ? 1 : 0,
        failed: outcome === 'failed' ? 1 : 0,
        requestBytes,
        responseBytes: answered,
        durationMs: Math.round(seconds * 1000),
      });
      if (redis === undefined && at - lastPrune > 3_600_000) {
        lastPrune = at;
        prune(kept, at);
      }
    },
    observeStream(exchange, consumer, { requestBytes, responseBytes }) {
      const operation = exchange.operation.name;
      metrics.streamBytes(consumer, operation, requestBytes, responseBytes);
      addTo(kept, `${periodsAt(Date.now()).day.id} ${consumer} ${operation}`, { requestBytes, responseBytes });
    },
    async report(from, to) {
      if (redis === undefined)
        return {
          source: 'memory',
          scope: 'this replica only, since it started',
          from,
          to,
          rows: rowsOf(kept, from, to),
        };
      await flush!();
      return {
        source: 'redis',
        scope: 'every replica sharing protection.redis',
        from,
        to,
        rows: await redisRows(redis, from, to),
      };
    },
    async close() {
      if (timer !== undefined) clearInterval(timer);
      await flush?.();
    },
  };
}

/** Sends the counts kept since the last flush to Redis (one hash per day), then forgets them; on a failure they wait for the next. */
function redisFlusher(client: RedisClient, prefix: string, pending: Table) {
  let flushing: Promise<void> | undefined;
  const send = async () => {
    if (pending.size === 0) return;
    const batch = new Map(pending);
    pending.clear();
    const pipeline = client.pipeline();
    for (const [key, counts] of batch) {
      const [day, consumer, operation] = key.split(' ') as [string, string, string];
      const hash = `${prefix}usage:${day}`;
      for (const name of COUNTS)
        if (counts[name] !== 0) pipeline.hincrby(hash, `${consumer} ${operation} ${name}`, counts[name]);
      pipeline.expire(hash, RETAIN_DAYS * 86_400);
    }
    const results = await pipeline.exec().catch(() => null);
    // Whatever failed is counted again next time (a command that ran and timed out may count twice).
    if (results === null || results.some(([error]) => error !== null))
      for (const [key, counts] of batch) addTo(pending, key, counts);
  };
  return (): Promise<void> => {
    flushing ??= send().finally(() => {
      flushing = undefined;
    });
    return flushing;
  };
}

async function redisRows(
  redis: { client: RedisClient; prefix: string },
  from: string,
  to: string,
): Promise<UsageRow[]> {
  const table: Table = new Map();
  for (let at = Date.parse(from); at <= Date.parse(to); at += 86_400_000) {
    const day = new Date(at).toISOString().slice(0, 10);
    const stored = await redis.client.hgetall(`${redis.prefix}usage:${day}`);
    for (const [field, value] of Object.entries(stored)) {
      const [consumer, operation, name] = field.split(' ') as [string, string, Count];
      if ((COUNTS as readonly string[]).includes(name))
        addTo(table, `${day} ${consumer} ${operation}`, { [name]: Number(value) });
    }
  }
  return rowsOf(table, from, to);
}

export { UNMAPPED };
