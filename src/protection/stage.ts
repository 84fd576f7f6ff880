// The protection stage: builds the store the config asks for and attaches admission to HTTP calls
// (an onRequest hook) and to WebSocket upgrades (an upgrade stage); it also hands the authentication
// stage the per-address budget of calls without a verified token (unauthenticated-budget.ts). A
// slot is released when the exchange's socket-level life ends: the response's 'close' (sent, refused
// later, upstream error, timeout, client abort) or, for a stream, the client socket's 'close' (the
// tunnel's whole life).
import type { UpgradeStage } from '../app.js';
import type { GatewayConfig } from '../config/schema.js';
import type { Stage } from '../stage-runner.js';
import type { GatewayMetrics } from '../telemetry/metrics.js';
import { onResponseClose } from '../response-close.js';
import { createProtection, type Protection, type Release } from './admission.js';
import { callerOf } from './caller.js';
import type { ConnectionCaps } from './connections.js';
import { resolveProtectionConfig } from './config.js';
import { createMemoryStore } from './memory-store.js';
import { createRedisStore } from './redis-store.js';
import type { LimitStore } from './store.js';
import { createUnauthenticatedBudget, type UnauthenticatedBudget } from './unauthenticated-budget.js';

export interface ProtectionStage {
  readonly protection: Protection;
  /** The request stage, after authentication; waits only on a shared (Redis) store. */
  readonly stage: Stage;
  readonly upgradeStage: UpgradeStage;
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

/** Releases once the stream's socket closes; at once when it already has (aborted while waiting for admission). */
function releaseOnClose(emitter: { destroyed: boolean; once(event: 'close', listener: () => void): unknown }, release: Release): void {
  if (emitter.destroyed) release();
  else emitter.once('close', release);
}

export function createProtectionStage(config: GatewayConfig, options: ProtectionStageOptions): ProtectionStage {
  const resolved = resolveProtectionConfig(config);
  const unauthenticatedRate = resolved.unauthenticatedRate;
  let store: LimitStore | undefined;
  if (resolved.hasOperationLimits || (unauthenticatedRate !== undefined && resolved.redis.url !== undefined)) {
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

  const unauthenticatedBudget = unauthenticatedRate === undefined ? undefined : createUnauthenticatedBudget({
    rate: unauthenticatedRate,
    refusalDelayMs: resolved.unauthenticatedRefusalDelayMs,
    isTrustedProxy: options.isTrustedProxy,
    shared: resolved.redis.url === undefined ? undefined : store,
    maxKeys: resolved.memory.maxKeys,
    onRefusal: (operation) => options.metrics.protectionRefusal(operation, 'unauthenticatedRate'),
  });

  return {
    protection,
    connectionCaps: resolved.connections,
    unauthenticatedBudget,
    stage: (request, reply) => {
      const release = protection.admit(request.operation.name, callerOf(request.principal, request.raw, options.isTrustedProxy));
      if (!(release instanceof Promise)) {
        onResponseClose(reply.raw, release);
        return undefined;
      }
      return release.then((admitted) => onResponseClose(reply.raw, admitted));
    },
    upgradeStage: async (context) => {
      const release = await protection.admit(context.operation.name, callerOf(context.principal, context.request, options.isTrustedProxy));
      releaseOnClose(context.request.socket, release);
    },
    close: () => protection.close(),
  };
}
