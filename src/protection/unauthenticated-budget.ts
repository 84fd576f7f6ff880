// A budget per client address for calls that present no token the gateway has already verified: no
// token, one refused before, or a new one whose signature must be checked. The authentication stage
// spends it before any signature check, so a flood of made-up tokens from one address costs a burst
// of checks and then a GCRA step each (as HAProxy's stick tables bound a source's error rate, or
// Envoy's local rate limit a descriptor). A call with a verified token never reaches it.
import type { IncomingMessage } from 'node:http';
import { performance } from 'node:perf_hooks';
import { LRUCache } from 'lru-cache';
import { CONCURRENCY_RETRY_AFTER_MS, StoreUnavailableError, type LimitStore, type StoreVerdict } from './store.js';
import { resourceExhausted } from './admission.js';
import { addressOf } from './caller.js';
import type { OperationLimits, RateLimit } from './config.js';
import { gcra } from './gcra.js';

/** Spends one unit of the request's client address; throws (or rejects with) the coded 429 when none is left. */
export type SpendUnauthenticated = (request: IncomingMessage, operation: string) => void | Promise<void>;

export interface UnauthenticatedBudgetOptions {
  readonly rate: RateLimit;
  readonly isTrustedProxy: (address: string) => boolean;
  /** Redis, when configured: the budget is then shared by every replica. */
  readonly shared: LimitStore | undefined;
  /** Addresses remembered in memory; the least recently used starts rested again. */
  readonly maxKeys: number;
  readonly onRefusal?: (operation: string) => void;
  /** Milliseconds, monotonic. */
  readonly now?: () => number;
}

/** The budget's name in the shared store, beside the operation names (none starts with `_`). */
export const UNAUTHENTICATED_BUDGET = '_unauthenticated';

export function createUnauthenticatedBudget(options: UnauthenticatedBudgetOptions): SpendUnauthenticated {
  const { rate, isTrustedProxy, shared } = options;
  const now = options.now ?? (() => performance.now());
  const arrivals = new LRUCache<string, { tat: number }>({ max: options.maxKeys });
  const limits: OperationLimits = Object.freeze({ rate, maxInFlightPerPrincipal: undefined, maxInFlight: undefined });

  const refuse = (operation: string, retryAfterMs: number): never => {
    options.onRefusal?.(operation);
    throw resourceExhausted(operation, 'unauthenticatedRate', retryAfterMs);
  };

  function spendHere(address: string, operation: string): void {
    const arrival = arrivals.get(address);
    const decision = gcra(arrival?.tat, now(), rate.intervalMs, rate.burst);
    if (!decision.allowed) refuse(operation, decision.retryAfterMs);
    if (arrival !== undefined) arrival.tat = decision.tat;
    else arrivals.set(address, { tat: decision.tat });
  }

  return (request, operation) => {
    const address = addressOf(request, isTrustedProxy);
    if (shared === undefined || !shared.ready()) return spendHere(address, operation);
    // While Redis cannot answer, this replica keeps the budget alone: it guards the replica's own CPU,
    // which a local count guards as well (protection.failMode is about callers' limits).
    const fallBack = (error: unknown) => {
      if (!(error instanceof StoreUnavailableError)) throw error;
      spendHere(address, operation);
    };
    let verdict: StoreVerdict | Promise<StoreVerdict>;
    try {
      verdict = shared.admit({ operation: UNAUTHENTICATED_BUDGET, caller: `a:${address}`, limits });
    } catch (error) {
      return fallBack(error);
    }
    return Promise.resolve(verdict).then((answer) => {
      if (!answer.admitted)
        refuse(operation, answer.limit === 'rate' ? answer.retryAfterMs : CONCURRENCY_RETRY_AFTER_MS);
    }, fallBack);
  };
}
