// The consumers as the status page shows them (server/status-page.ts): each consumer's quota use in
// the current UTC day and month, its usage of the last days, its keys' metadata and its brokered
// token's state. Read only (nothing is counted), and never a key, a key's hash, a token or a secret:
// what it returns is exactly what the page may show.
import type { ConsumersConfig } from '../config/schema.js';
import type { KeyRecord } from './gateway-keys.js';
import type { KeyWatch } from './key-store.js';
import { periodsAt } from './periods.js';
import type { QuotaCounter } from './quotas.js';
import type { BrokeredTokenStatus, TokenBroker } from './token-broker.js';
import { UNMAPPED, type ResolvedConsumer } from './config.js';
import type { UsageLedger, UsageReport } from './usage.js';

/** Days of usage the page shows, today included. */
export const STATUS_USAGE_DAYS = 7;

export interface QuotaUse {
  readonly operation: string;
  readonly period: 'day' | 'month';
  readonly limit: number;
  readonly used: number;
  /** ISO 8601: when the period starts again (UTC). */
  readonly resetsAt: string;
}

export interface KeyStatus {
  readonly id: string;
  readonly createdAt: string;
  readonly expiresAt: string;
  readonly state: 'in force' | 'expired' | 'revoked';
  /** Where it may be used from, and which operations it may call; absent: anywhere, every operation. */
  readonly sources?: readonly string[];
  readonly operations?: readonly string[];
  readonly description?: string;
}

export interface DayUsage {
  readonly day: string;
  readonly calls: number;
  readonly refused: number;
  readonly failed: number;
  readonly requestBytes: number;
  readonly responseBytes: number;
}

export interface ConsumerStatus {
  readonly name: string;
  readonly quotas: readonly QuotaUse[];
  /** The last STATUS_USAGE_DAYS days, oldest first; a day without calls is shown as zeros. */
  readonly usage: readonly DayUsage[];
  /** The consumer's gateway keys (none without a key store). */
  readonly keys: readonly KeyStatus[];
  /** Undefined: the consumer has no upstreamToken. */
  readonly brokeredToken: BrokeredTokenStatus | undefined;
}

export interface ConsumersStatus {
  /** The usage report's source and scope (usage.ts): every replica's through Redis, or this replica's. */
  readonly usageSource: UsageReport['source'];
  readonly usageScope: string;
  readonly consumers: readonly ConsumerStatus[];
  /** Calls no consumer claimed, by day. */
  readonly unmapped: readonly DayUsage[];
}

export interface StatusSources {
  readonly list: ConsumersConfig['list'];
  readonly consumers: ReadonlyMap<string, ResolvedConsumer>;
  readonly quotas: QuotaCounter;
  readonly usage: UsageLedger;
  readonly keys: KeyWatch | undefined;
  readonly brokers: ReadonlyMap<string, TokenBroker>;
}

const DAY_MS = 86_400_000;
const day = (at: number) => new Date(at).toISOString().slice(0, 10);

/** The report's rows of `consumer` summed by day, one entry per day of the range. */
function usageByDay(report: UsageReport, consumer: string, days: readonly string[]): DayUsage[] {
  const sums = new Map(
    days.map((name) => [name, { day: name, calls: 0, refused: 0, failed: 0, requestBytes: 0, responseBytes: 0 }]),
  );
  for (const row of report.rows) {
    const sum = row.consumer === consumer ? sums.get(row.day) : undefined;
    if (sum === undefined) continue;
    sum.calls += row.calls;
    sum.refused += row.refused;
    sum.failed += row.failed;
    sum.requestBytes += row.requestBytes;
    sum.responseBytes += row.responseBytes;
  }
  return [...sums.values()];
}

/** A key's metadata: every field of its record but its hash. */
function keyStatus(record: KeyRecord, at: number): KeyStatus {
  const { id, createdAt, expiresAt, sources, operations, description } = record;
  const state = record.revokedAt !== undefined ? 'revoked' : Date.parse(expiresAt) <= at ? 'expired' : 'in force';
  return {
    id,
    createdAt,
    expiresAt,
    state,
    ...(sources !== undefined && { sources }),
    ...(operations !== undefined && { operations }),
    ...(description !== undefined && { description }),
  };
}

/**
 * The quotas of `consumer` in force now: each operation it has its own quota for, and each operation
 * it called in the report's days that the default quota covers.
 */
async function quotaUse(
  sources: StatusSources,
  consumer: ResolvedConsumer,
  configured: readonly string[],
  report: UsageReport,
  at: number,
): Promise<QuotaUse[]> {
  const called = report.rows.filter((row) => row.consumer === consumer.name).map((row) => row.operation);
  const operations = [...new Set([...configured, ...called])].sort();
  const { day: today, month } = periodsAt(at);
  const out: QuotaUse[] = [];
  for (const operation of operations) {
    const quota = consumer.quotaOf(operation);
    if (quota === undefined) continue;
    const used = await sources.quotas.used(consumer.name, operation, at);
    if (quota.perDay !== undefined)
      out.push({ operation, period: 'day', limit: quota.perDay, used: used.day, resetsAt: iso(today.end) });
    if (quota.perMonth !== undefined)
      out.push({ operation, period: 'month', limit: quota.perMonth, used: used.month, resetsAt: iso(month.end) });
  }
  return out;
}

const iso = (at: number) => new Date(at).toISOString();

/** The status of every configured consumer at `at`. */
export async function consumersStatus(sources: StatusSources, at = Date.now()): Promise<ConsumersStatus> {
  const days = Array.from({ length: STATUS_USAGE_DAYS }, (_, index) =>
    day(at - (STATUS_USAGE_DAYS - 1 - index) * DAY_MS),
  );
  const report = await sources.usage.report(days[0]!, days.at(-1)!);
  const records = sources.keys?.ring.records ?? [];
  const consumers: ConsumerStatus[] = [];
  for (const entry of sources.list) {
    const consumer = sources.consumers.get(entry.name)!;
    consumers.push({
      name: entry.name,
      quotas: await quotaUse(sources, consumer, Object.keys(entry.quotas.operations), report, at),
      usage: usageByDay(report, entry.name, days),
      keys: records.filter((record) => record.consumer === entry.name).map((record) => keyStatus(record, at)),
      brokeredToken: sources.brokers.get(entry.name)?.status(),
    });
  }
  return {
    usageSource: report.source,
    usageScope: report.scope,
    consumers,
    unmapped: usageByDay(report, UNMAPPED, days),
  };
}
