// The protection stage: builds the store the config asks for and admits calls and upgrades alike;
// it also hands the authentication stage the per-address budget of calls without a verified token
// (unauthenticated-budget.ts). A slot is released when the exchange's lifeline closes: a call's
// response (sent, refused later, upstream error, timeout, client abort) or an upgrade's client socket
// (the tunnel's whole life).
import type { ProtectionConfig } from '../config/schema.js';
import type { Stage } from '../exchange/exchange.js';
import type { GatewayMetrics } from '../telemetry/metrics.js';
import { onResponseClose } from '../exchange/response-close.js';
import { createProtection, type Protection } from './admission.js';
import { callerOf } from '../exchange/caller.js';
import type { ConnectionCaps } from './connections.js';
import { resolveProtectionConfig } from './config.js';
import { createMemoryStore } from './memory-store.js';
import { redisMode, type RedisProblem } from './redis-connection.js';
import { createRedisStore } from './redis-store.js';
import type { LimitStore } from './store.js';
import { createUnauthenticatedBudget, type UnauthenticatedBudget } from './unauthenticated-budget.js';

export interface ProtectionStage {
  readonly protection: Protection;
  /** The stage, after authentication; waits only on a shared (Redis) store. */
  readonly stage: Stage;
  /** protection.connections, for the API listener (connections.ts). */
  readonly connectionCaps: ConnectionCaps;
  /** The per-address budget of calls without a verified token, for the authentication stage; undefined when off. */
  readonly unauthenticatedBudget: UnauthenticatedBudget | undefined;
  close(): Promise<void>;
}

export interface ProtectionStageOptions {
  readonly metrics: GatewayMetrics;
  readonly log: { warn(details: object, message: string): void; info(details: object, message: string): void };
  readonly isTrustedProxy: (address: string) => boolean;
}

/** Each problem's log line: one when it first shows, then at most one a minute while it lasts. */
const PROBLEM_LOG_INTERVAL_MS = 60_000;
const PROBLEM_MESSAGES: Record<RedisProblem, string> = {
  authentication: 'limit store (Redis) refused the credentials: check protection.redis (url, password, username)',
  reply_too_large: 'limit store (Redis) sent a reply past protection.redis.maxReplyBytes: connection cut',
  master_at_sentinel: "limit store (Redis): a sentinel named a sentinel's address as the master; its answer refused",
};

/** Counts every problem (ledger_gateway_protection_store_errors_total) and logs it, coded, never a credential. */
function storeProblems(options: ProtectionStageOptions): (problem: RedisProblem) => void {
  const lastLogged = new Map<RedisProblem, number>();
  const counts = new Map<RedisProblem, number>();
  return (problem) => {
    options.metrics.protectionStoreError(problem);
    counts.set(problem, (counts.get(problem) ?? 0) + 1);
    const now = Date.now();
    if (now - (lastLogged.get(problem) ?? -Infinity) < PROBLEM_LOG_INTERVAL_MS) return;
    lastLogged.set(problem, now);
    options.log.warn({ code: problem, times: counts.get(problem) }, PROBLEM_MESSAGES[problem]);
    counts.set(problem, 0);
  };
}

export function createProtectionStage(section: ProtectionConfig, options: ProtectionStageOptions): ProtectionStage {
  const resolved = resolveProtectionConfig(section);
  const unauthenticatedRate = resolved.unauthenticatedRate;
  let store: LimitStore | undefined;
  const sharedStore = redisMode(resolved.redis) !== undefined;
  if (resolved.hasOperationLimits || (unauthenticatedRate !== undefined && sharedStore)) {
    const redis = resolved.redis;
    store = !sharedStore
      ? createMemoryStore({ maxKeys: resolved.memory.maxKeys })
      : createRedisStore({
          connection: redis,
          keyPrefix: redis.keyPrefix,
          commandTimeoutMs: redis.commandTimeoutMs,
          connectTimeoutMs: redis.connectTimeoutMs,
          leaseMs: redis.leaseMs,
          onReadyChange: (ready) =>
            ready
              ? options.log.info({}, 'limit store (Redis) connected')
              : options.log.warn({ failMode: resolved.failMode }, 'limit store (Redis) connection lost; reconnecting'),
          onProblem: storeProblems(options),
        });
  }
  if (store !== undefined) options.metrics.watchProtectionStore(() => store.ready());
  const protection = createProtection(resolved, store, {
    onRefusal: (operation, limit) => options.metrics.protectionRefusal(operation, limit),
    onStoreFailure: (failMode) => options.metrics.protectionStoreFailure(failMode),
    warn: (details, message) => options.log.warn(details, message),
  });

  const unauthenticatedBudget =
    unauthenticatedRate === undefined
      ? undefined
      : createUnauthenticatedBudget({
          rate: unauthenticatedRate,
          refusalDelayMs: resolved.unauthenticatedRefusalDelayMs,
          isTrustedProxy: options.isTrustedProxy,
          shared: sharedStore ? store : undefined,
          maxKeys: resolved.memory.maxKeys,
          onRefusal: (operation) => options.metrics.protectionRefusal(operation, 'unauthenticatedRate'),
        });

  return {
    protection,
    connectionCaps: resolved.connections,
    unauthenticatedBudget,
    stage: (exchange) => {
      const release = protection.admit(
        exchange.operation.name,
        callerOf(exchange.principal, exchange.raw, options.isTrustedProxy),
      );
      if (!(release instanceof Promise)) {
        onResponseClose(exchange.lifeline, release);
        return undefined;
      }
      // Released at once when the lifeline closed while admission waited (onResponseClose).
      return release.then((admitted) => onResponseClose(exchange.lifeline, admitted));
    },
    close: () => protection.close(),
  };
}
