// What consumers keep across configuration generations: the metrics, the quota and budget counts and usage
// (a reload must not start them again), the brokered tokens of unchanged credentials, the key
// store's watch, and the Redis connection (protection.redis, opened once, when first needed).
import { isDeepStrictEqual } from 'node:util';
import type { Registry } from 'prom-client';
import type { ConsumerConfig, ConsumersConfig } from '../config/schema.js';
import { createConsumerMetrics, type ConsumerMetrics } from '../telemetry/metrics.js';
import { watchKeyFile } from './key-file.js';
import { watchRedisKeys, type RedisClient } from './key-redis.js';
import type { KeyWatch } from './key-store.js';
import { createMemoryBudgetCounter, createRedisBudgetCounter, type BudgetCounter } from './budgets.js';
import { createMemoryQuotaCounter, createRedisQuotaCounter, type QuotaCounter } from './quotas.js';
import { createTokenBroker, type TokenBroker } from './token-broker.js';
import { createUsageLedger, type UsageLedger } from './usage.js';

export interface ConsumerStateOptions {
  readonly registry: Registry;
  readonly exemplars: boolean;
  /** Opens the connection to protection.redis; undefined: no Redis is configured. */
  readonly openRedis: (() => RedisClient) | undefined;
  /** protection.redis.keyPrefix. */
  readonly keyPrefix: string;
  readonly log: { info(details: object, message: string): void; warn(details: object, message: string): void };
}

export interface ConsumerState {
  readonly metrics: ConsumerMetrics;
  readonly quotas: QuotaCounter;
  /** The budgets' spending per UTC day (shared and kept in Redis when protection.redis names one). */
  readonly budgets: BudgetCounter;
  readonly usage: UsageLedger;
  readonly log: ConsumerStateOptions['log'];
  /** The key store's watch for this keys section (the running one when it did not change); undefined: no keys. */
  keysFor(section: ConsumersConfig['keys']): KeyWatch | undefined;
  /** One broker per consumer with upstream credentials; one whose credentials did not change keeps its token. */
  brokersFor(
    list: ConsumersConfig['list'],
    timing: ConsumersConfig['upstreamTokens'],
  ): ReadonlyMap<string, TokenBroker>;
  close(): Promise<void>;
}

export function createConsumerState(options: ConsumerStateOptions): ConsumerState {
  const { log, keyPrefix } = options;
  const redis = options.openRedis?.();
  redis?.on('error', () => {}); // the limits' connection logs Redis's state; commands here fail on their own
  const metrics = createConsumerMetrics(options.registry, options.exemplars);
  const usage = createUsageLedger(metrics, redis === undefined ? undefined : { client: redis, prefix: keyPrefix });
  let keys: { section: ConsumersConfig['keys']; watch: KeyWatch | undefined } | undefined;
  let earlierKeys: typeof keys;
  let brokers = new Map<string, { readonly settings: unknown; readonly broker: TokenBroker }>();

  function openKeys(section: ConsumersConfig['keys']): KeyWatch | undefined {
    const watching = { refreshIntervalMs: section.refreshIntervalMs, log };
    if (section.store === 'file') return watchKeyFile(section.file!, watching);
    if (section.store === 'redis' && redis !== undefined) return watchRedisKeys(redis, keyPrefix, watching);
    return undefined;
  }

  return {
    metrics,
    quotas: redis === undefined ? createMemoryQuotaCounter() : createRedisQuotaCounter(redis, keyPrefix),
    budgets: redis === undefined ? createMemoryBudgetCounter() : createRedisBudgetCounter(redis, keyPrefix),
    usage,
    log,
    keysFor(section) {
      if (keys !== undefined && isDeepStrictEqual(keys.section, section)) return keys.watch;
      if (earlierKeys !== undefined && isDeepStrictEqual(earlierKeys.section, section)) {
        [keys, earlierKeys] = [earlierKeys, keys];
        return keys.watch;
      }
      // The running watch stays while a reload may still be refused; the one before it stops.
      earlierKeys?.watch?.close();
      earlierKeys = keys;
      keys = { section, watch: openKeys(section) };
      return keys.watch;
    },
    brokersFor(list, timing) {
      const next = new Map<string, { readonly settings: unknown; readonly broker: TokenBroker }>();
      for (const consumer of list.filter(
        (entry): entry is ConsumerConfig & { upstreamToken: object } => entry.upstreamToken !== undefined,
      )) {
        const settings = { token: consumer.upstreamToken, timing };
        const kept = brokers.get(consumer.name);
        const broker =
          kept !== undefined && isDeepStrictEqual(kept.settings, settings)
            ? kept.broker
            : createTokenBroker(consumer.upstreamToken, {
                consumer: consumer.name,
                timing,
                log,
                onRequest: (result) => metrics.upstreamTokenRequest(consumer.name, result),
              });
        next.set(consumer.name, { settings, broker });
      }
      brokers = next;
      return new Map([...next].map(([name, entry]) => [name, entry.broker]));
    },
    async close() {
      keys?.watch?.close();
      earlierKeys?.watch?.close();
      await usage.close();
      redis?.disconnect();
    },
  };
}
