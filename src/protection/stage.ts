// The protection stage: builds the store the config asks for and admits calls and upgrades alike.
// A slot is released when the exchange's lifeline closes: a call's response (sent, refused later,
// upstream error, timeout, client abort) or an upgrade's client socket (the tunnel's whole life).
import type { GatewayConfig } from '../config/schema.js';
import type { Stage } from '../exchange.js';
import type { GatewayMetrics } from '../telemetry/metrics.js';
import { onResponseClose } from '../response-close.js';
import { createProtection, type Protection } from './admission.js';
import { callerOf } from './caller.js';
import { resolveProtectionConfig } from './config.js';
import { createMemoryStore } from './memory-store.js';
import { createRedisStore } from './redis-store.js';
import type { LimitStore } from './store.js';

export interface ProtectionStage {
  readonly protection: Protection;
  /** The stage, after authentication; waits only on a shared (Redis) store. */
  readonly stage: Stage;
  close(): Promise<void>;
}

export interface ProtectionStageOptions {
  readonly metrics: GatewayMetrics;
  readonly log: { warn(details: object, message: string): void; info(details: object, message: string): void };
  readonly isTrustedProxy: (address: string) => boolean;
}

export function createProtectionStage(config: GatewayConfig, options: ProtectionStageOptions): ProtectionStage {
  const resolved = resolveProtectionConfig(config);
  let store: LimitStore | undefined;
  if (resolved.hasOperationLimits) {
    const redis = resolved.redis;
    store = redis.url === undefined
      ? createMemoryStore({ maxKeys: resolved.memory.maxKeys })
      : createRedisStore({
        url: redis.url,
        keyPrefix: redis.keyPrefix,
        commandTimeoutMs: redis.commandTimeoutMs,
        connectTimeoutMs: redis.connectTimeoutMs,
        leaseMs: redis.leaseMs,
        onReadyChange: (ready) => (ready
          ? options.log.info({}, 'limit store (Redis) connected')
          : options.log.warn({ failMode: resolved.failMode }, 'limit store (Redis) connection lost; reconnecting')),
      });
  }
  if (store !== undefined) options.metrics.watchProtectionStore(() => store.ready());
  const protection = createProtection(resolved, store, {
    onRefusal: (operation, limit) => options.metrics.protectionRefusal(operation, limit),
    onStoreFailure: (failMode) => options.metrics.protectionStoreFailure(failMode),
    warn: (details, message) => options.log.warn(details, message),
  });

  return {
    protection,
    stage: (exchange) => {
      const release = protection.admit(exchange.operation.name, callerOf(exchange.principal, exchange.raw, options.isTrustedProxy));
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
