// A budget per client address for calls that present no token the gateway has already verified: no
// token, one refused before, or a new one whose signature must be checked. The authentication stage
// spends a unit before any signature check and gets it back when the token proves valid, so the
// budget counts refusals (as HAProxy's stick tables count a source's error rate) while a flood of
// made-up tokens from one address costs a burst of checks and then a GCRA step each. A call with a
// verified token never reaches it. A refusal is held a while before it is answered, as HAProxy's
// `http-request tarpit` holds one: a flood that waits for each answer then costs a refusal a second
// per connection, and the connection caps bound the connections. One refusal is held per connection
// at a time, so that pipelined calls cannot pile up held answers: the others are answered at once,
// queued behind it.
import type { IncomingMessage } from 'node:http';
import { performance } from 'node:perf_hooks';
import { LRUCache } from 'lru-cache';
import { resourceExhausted } from './admission.js';
import { addressOf } from '../exchange/caller.js';
import type { OperationLimits, RateLimit } from './config.js';
import { gcra } from './gcra.js';
import { CONCURRENCY_RETRY_AFTER_MS, StoreUnavailableError, type LimitStore, type StoreVerdict } from './store.js';

export interface UnauthenticatedBudget {
  /** Spends one unit of the request's client address; throws (or rejects with) the coded 429 when none is left. */
  spend: (request: IncomingMessage, operation: string) => void | Promise<void>;
  /** Gives back the unit `request` spent: its token proved valid. */
  refund(request: IncomingMessage): void;
}

export interface UnauthenticatedBudgetOptions {
  readonly rate: RateLimit;
  /** How long a refusal is held before it is answered; 0: answered at once. */
  readonly refusalDelayMs: number;
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

const kHeldRefusal = Symbol('ledger-gateway.heldRefusal');
type HoldingSocket = IncomingMessage['socket'] & { [kHeldRefusal]?: boolean };

/** Where a request's unit was spent, so that its refund goes back there. */
const kSpent = Symbol('ledger-gateway.unauthenticatedUnitSpent');
type SpendingRequest = IncomingMessage & { [kSpent]?: { address: string; shared: boolean } };

export function createUnauthenticatedBudget(options: UnauthenticatedBudgetOptions): UnauthenticatedBudget {
  const { rate, refusalDelayMs, isTrustedProxy, shared } = options;
  const now = options.now ?? (() => performance.now());
  const arrivals = new LRUCache<string, { tat: number }>({ max: options.maxKeys });
  const limits: OperationLimits = Object.freeze({ rate, maxInFlightPerPrincipal: undefined, maxInFlight: undefined });
  const queryOf = (address: string) => ({ operation: UNAUTHENTICATED_BUDGET, caller: `a:${address}`, limits });

  const refuse = (request: IncomingMessage, operation: string, retryAfterMs: number): Promise<never> => {
    options.onRefusal?.(operation);
    const refusal = resourceExhausted(operation, 'unauthenticatedRate', retryAfterMs);
    const socket = request.socket as HoldingSocket;
    if (refusalDelayMs === 0 || socket[kHeldRefusal] === true) return Promise.reject(refusal);
    socket[kHeldRefusal] = true;
    return new Promise((_resolve, reject) => {
      setTimeout(() => {
        socket[kHeldRefusal] = false;
        reject(refusal);
      }, refusalDelayMs);
    });
  };

  function spendHere(request: SpendingRequest, address: string, operation: string): void | Promise<never> {
    const arrival = arrivals.get(address);
    const decision = gcra(arrival?.tat, now(), rate.intervalMs, rate.burst);
    if (!decision.allowed) return refuse(request, operation, decision.retryAfterMs);
    if (arrival !== undefined) arrival.tat = decision.tat;
    else arrivals.set(address, { tat: decision.tat });
    request[kSpent] = { address, shared: false };
    return undefined;
  }

  function spend(request: SpendingRequest, operation: string): void | Promise<void> {
    const address = addressOf(request, isTrustedProxy);
    if (shared === undefined || !shared.ready()) return spendHere(request, address, operation);
    // While Redis cannot answer, this replica keeps the budget alone: it guards the replica's own CPU,
    // which a local count guards as well (protection.failMode is about callers' limits).
    const fallBack = (error: unknown) => {
      if (!(error instanceof StoreUnavailableError)) throw error;
      return spendHere(request, address, operation);
    };
    let verdict: StoreVerdict | Promise<StoreVerdict>;
    try {
      verdict = shared.admit(queryOf(address));
    } catch (error) {
      return fallBack(error);
    }
    return Promise.resolve(verdict).then((answer) => {
      if (!answer.admitted) {
        return refuse(request, operation, answer.limit === 'rate' ? answer.retryAfterMs : CONCURRENCY_RETRY_AFTER_MS);
      }
      request[kSpent] = { address, shared: true };
      return undefined;
    }, fallBack);
  }

  function refund(request: SpendingRequest): void {
    const spent = request[kSpent];
    if (spent === undefined) return;
    request[kSpent] = undefined;
    if (spent.shared) {
      shared?.refund?.(queryOf(spent.address)); // best effort: a refund lost costs its address one unit
      return;
    }
    const arrival = arrivals.get(spent.address);
    if (arrival !== undefined) arrival.tat = Math.max(now(), arrival.tat - rate.intervalMs);
  }

  return { spend, refund };
}
