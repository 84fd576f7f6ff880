// What the schema cannot say about protection: operation names must exist in the route catalogue.
// Resolved once at start into one table of limits per operation (the hot path does one Map lookup).
import {
  ConfigError,
  type OperationLimitsConfig,
  type ProtectionConfig,
  type RateLimitConfig,
} from '../config/schema.js';
import { OPERATION_NAMES } from '../operations.js';
import { redisConfigProblems } from './redis-connection.js';

/** A GCRA rate: one request per `intervalMs`, `burst` at once for a rested caller. */
export interface RateLimit {
  readonly requests: number;
  readonly perSeconds: number;
  readonly burst: number;
  /** perSeconds / requests, in milliseconds (the GCRA emission interval). */
  readonly intervalMs: number;
}

export interface OperationLimits {
  readonly rate: RateLimit | undefined;
  /** Concurrent calls per caller; undefined = no cap. */
  readonly maxInFlightPerPrincipal: number | undefined;
  /** Concurrent calls of the operation, all callers; undefined = no cap. */
  readonly maxInFlight: number | undefined;
}

export interface ResolvedProtection {
  /** Process-wide cap; undefined = none. */
  readonly maxInFlight: number | undefined;
  /** One caller's share of the process-wide cap, in slots; undefined = none. */
  readonly maxInFlightPerCaller: number | undefined;
  /** The per-address budget of calls without a verified token; undefined = none. */
  readonly unauthenticatedRate: RateLimit | undefined;
  /** How long a refusal over that budget is held before it is answered; 0: not held. */
  readonly unauthenticatedRefusalDelayMs: number;
  /** Open client connections, in total and per peer address; undefined = no cap. */
  readonly connections: { readonly max: number | undefined; readonly maxPerAddress: number | undefined };
  readonly failMode: 'open' | 'closed';
  /** Limits of an operation by name (the default for any name without its own entry). */
  limitsOf(operation: string): OperationLimits;
  /** True when some operation has a rate or cap, so a store is needed at all. */
  readonly hasOperationLimits: boolean;
  readonly redis: ProtectionConfig['redis'];
  readonly memory: ProtectionConfig['memory'];
}

const NO_LIMITS: OperationLimits = Object.freeze({
  rate: undefined,
  maxInFlightPerPrincipal: undefined,
  maxInFlight: undefined,
});

function cap(value: number | undefined): number | undefined {
  return value === undefined || value === 0 ? undefined : value;
}

function resolveRate(rate: RateLimitConfig | null | undefined): RateLimit | undefined {
  if (rate === undefined || rate === null) return undefined;
  return Object.freeze({
    requests: rate.requests,
    perSeconds: rate.perSeconds,
    burst: rate.burst ?? rate.requests,
    intervalMs: (rate.perSeconds * 1000) / rate.requests,
  });
}

function resolveLimits(own: OperationLimitsConfig | undefined, fallback: OperationLimitsConfig): OperationLimits {
  const limits: OperationLimits = {
    rate: resolveRate(own !== undefined && 'rate' in own ? own.rate : fallback.rate),
    maxInFlightPerPrincipal: cap(own?.maxInFlightPerPrincipal ?? fallback.maxInFlightPerPrincipal),
    maxInFlight: cap(own?.maxInFlight ?? fallback.maxInFlight),
  };
  return isUnlimited(limits) ? NO_LIMITS : Object.freeze(limits);
}

export function isUnlimited(limits: OperationLimits): boolean {
  return limits.rate === undefined && limits.maxInFlightPerPrincipal === undefined && limits.maxInFlight === undefined;
}

/** Checks the operation names and precomputes every operation's limits; a ConfigError names each bad key. */
export function resolveProtectionConfig(section: ProtectionConfig): ResolvedProtection {
  const known = new Set(OPERATION_NAMES);
  const problems = Object.keys(section.operations)
    .filter((name) => !known.has(name))
    .map(
      (name) =>
        `protection.operations.${name}: unknown operation name (docs/request-policy.md "Routes and operations" lists them)`,
    );
  problems.push(...redisConfigProblems(section.redis));
  if (problems.length > 0) throw new ConfigError('protection', problems);

  const fallback = resolveLimits(undefined, section.default);
  const table = new Map<string, OperationLimits>();
  for (const [name, own] of Object.entries(section.operations)) table.set(name, resolveLimits(own, section.default));
  const hasOperationLimits = !isUnlimited(fallback) || [...table.values()].some((limits) => !isUnlimited(limits));

  const maxInFlight = cap(section.maxInFlight);
  return {
    maxInFlight,
    maxInFlightPerCaller:
      maxInFlight === undefined || section.principalShare >= 1
        ? undefined
        : Math.max(1, Math.floor(maxInFlight * section.principalShare)),
    unauthenticatedRate: resolveRate(section.unauthenticated.rate),
    unauthenticatedRefusalDelayMs: section.unauthenticated.refusalDelayMs,
    connections: { max: cap(section.connections.max), maxPerAddress: cap(section.connections.maxPerAddress) },
    failMode: section.failMode,
    limitsOf: (operation) => table.get(operation) ?? fallback,
    hasOperationLimits,
    redis: section.redis,
    memory: section.memory,
  };
}
