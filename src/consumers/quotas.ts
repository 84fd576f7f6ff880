// Quotas: calls per consumer and operation in a UTC day and a UTC calendar month, counted when the
// call passes the limits (whatever follows). In Redis (protection.redis) one script checks and
// counts both periods at once, so replicas share exact counts and a restart keeps them; in memory
// they are this replica's, and a restart starts them again. The answer says what is left in the
// IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers: RateLimit-Policy and RateLimit).
import type { Quota } from './config.js';
import type { RedisClient } from './key-redis.js';
import { periodsAt } from './periods.js';

export type QuotaPeriod = 'day' | 'month';

export interface PeriodState {
  readonly period: QuotaPeriod;
  readonly limit: number;
  /** Calls left after this one (0 when it was refused). */
  readonly remaining: number;
  /** Seconds until the period starts again. */
  readonly resetSeconds: number;
  /** Seconds the period lasts (the window of RateLimit-Policy). */
  readonly windowSeconds: number;
}

export interface QuotaVerdict {
  /** The period that is spent: the call was not counted and is refused; undefined: counted. */
  readonly spent: QuotaPeriod | undefined;
  readonly periods: readonly PeriodState[];
}

export interface QuotaCounter {
  /** Counts one call unless a period of its quota is spent; a rejected promise when the shared store cannot answer. */
  take(consumer: string, operation: string, quota: Quota, at: number): QuotaVerdict | Promise<QuotaVerdict>;
  /** The calls counted in the day and the month `at` falls in (the status page); nothing is counted. */
  used(consumer: string, operation: string, at: number): PeriodCounts | Promise<PeriodCounts>;
}

export interface PeriodCounts {
  readonly day: number;
  readonly month: number;
}

function states(quota: Quota, at: number, dayCount: number, monthCount: number): PeriodState[] {
  const { day, month } = periodsAt(at);
  const out: PeriodState[] = [];
  const state = (period: QuotaPeriod, limit: number, count: number, bounds: { start: number; end: number }) =>
    out.push({
      period,
      limit,
      remaining: Math.max(0, limit - count),
      resetSeconds: Math.max(1, Math.ceil((bounds.end - at) / 1000)),
      windowSeconds: Math.round((bounds.end - bounds.start) / 1000),
    });
  if (quota.perDay !== undefined) state('day', quota.perDay, dayCount, day);
  if (quota.perMonth !== undefined) state('month', quota.perMonth, monthCount, month);
  return out;
}

/** This replica's counts: the current day's and month's, the older ones dropped as the periods turn. */
export function createMemoryQuotaCounter(): QuotaCounter {
  let dayId = '';
  let monthId = '';
  let days = new Map<string, number>();
  let months = new Map<string, number>();
  return {
    take(consumer, operation, quota, at) {
      const { day, month } = periodsAt(at);
      if (day.id !== dayId) {
        dayId = day.id;
        days = new Map<string, number>();
      }
      if (month.id !== monthId) {
        monthId = month.id;
        months = new Map<string, number>();
      }
      const key = `${consumer} ${operation}`;
      const dayCount = days.get(key) ?? 0;
      const monthCount = months.get(key) ?? 0;
      const spent: QuotaPeriod | undefined =
        quota.perDay !== undefined && dayCount >= quota.perDay
          ? 'day'
          : quota.perMonth !== undefined && monthCount >= quota.perMonth
            ? 'month'
            : undefined;
      if (spent !== undefined) return { spent, periods: states(quota, at, dayCount, monthCount) };
      days.set(key, dayCount + 1);
      months.set(key, monthCount + 1);
      return { spent, periods: states(quota, at, dayCount + 1, monthCount + 1) };
    },
    used(consumer, operation, at) {
      const { day, month } = periodsAt(at);
      const key = `${consumer} ${operation}`;
      return {
        day: day.id === dayId ? (days.get(key) ?? 0) : 0,
        month: month.id === monthId ? (months.get(key) ?? 0) : 0,
      };
    },
  };
}

// KEYS: the day's and the month's count; ARGV: their limits (0: none) and lifetimes in seconds.
// Returns {0|1|2, day count, month count}: 0 counted, 1 the day spent, 2 the month spent.
const TAKE = `
local day = tonumber(redis.call('GET', KEYS[1]) or '0')
local month = tonumber(redis.call('GET', KEYS[2]) or '0')
local dayLimit = tonumber(ARGV[1])
local monthLimit = tonumber(ARGV[2])
if dayLimit > 0 and day >= dayLimit then return {1, day, month} end
if monthLimit > 0 and month >= monthLimit then return {2, day, month} end
if dayLimit > 0 then
  day = redis.call('INCR', KEYS[1])
  redis.call('EXPIRE', KEYS[1], ARGV[3])
end
if monthLimit > 0 then
  month = redis.call('INCR', KEYS[2])
  redis.call('EXPIRE', KEYS[2], ARGV[4])
end
return {0, day, month}
`;

type TakingClient = RedisClient & { ledgerGatewayQuotaTake(keys: number, ...args: string[]): Promise<number[]> };

/** Counts shared by every replica, kept for their period and a day more (a report may read them). */
export function createRedisQuotaCounter(client: RedisClient, prefix: string): QuotaCounter {
  client.defineCommand('ledgerGatewayQuotaTake', { lua: TAKE });
  const taking = client as TakingClient;
  /** The day's and the month's count keys, in one hash slot (a Cluster runs a script on one slot only). */
  const keysOf = (consumer: string, operation: string, at: number) => {
    const { day, month } = periodsAt(at);
    const tag = `{${consumer}:${operation}}`;
    return [`${prefix}quota:${tag}:day:${day.id}`, `${prefix}quota:${tag}:month:${month.id}`] as const;
  };
  return {
    async take(consumer, operation, quota, at) {
      const { day, month } = periodsAt(at);
      const [outcome, dayCount, monthCount] = await taking.ledgerGatewayQuotaTake(
        2,
        ...keysOf(consumer, operation, at),
        String(quota.perDay ?? 0),
        String(quota.perMonth ?? 0),
        String(Math.ceil((day.end - at) / 1000) + 86_400),
        String(Math.ceil((month.end - at) / 1000) + 86_400),
      );
      const spent = outcome === 1 ? 'day' : outcome === 2 ? 'month' : undefined;
      return { spent, periods: states(quota, at, dayCount!, monthCount!) };
    },
    async used(consumer, operation, at) {
      const [day, month] = await client.mget(...keysOf(consumer, operation, at));
      return { day: Number(day ?? 0), month: Number(month ?? 0) };
    },
  };
}

/** The RateLimit-Policy and RateLimit fields of a verdict (Structured Field lists, RFC 9651). */
export function rateLimitFields(verdict: QuotaVerdict): { policy: string; state: string } {
  return {
    policy: verdict.periods.map((p) => `"${p.period}";q=${p.limit};w=${p.windowSeconds}`).join(', '),
    state: verdict.periods.map((p) => `"${p.period}";r=${p.remaining};t=${p.resetSeconds}`).join(', '),
  };
}
