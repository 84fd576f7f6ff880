// What a limit store answers: admit a call (counting it against its operation's limits) or say
// which limit refused it. Two stores: memory-store.ts (one replica) and redis-store.ts (shared).
import type { OperationLimits } from './config.js';

/** Which limit refused a call; the `limit` context key of the 429 and the metric label. */
export type LimitName =
  | 'rate'
  | 'principalConcurrency'
  | 'operationConcurrency'
  | 'gatewayConcurrency'
  | 'gatewayPrincipalConcurrency'
  | 'unauthenticatedRate';

/** A concurrency refusal cannot know when a slot frees: retry after a second (Canton's retryInfo). */
export const CONCURRENCY_RETRY_AFTER_MS = 1000;

export interface AdmissionQuery {
  /** Operation name from the route catalogue (bounded). */
  readonly operation: string;
  /** Who is counted: `p:<sub>` for a principal, `a:<address>` for a call without one. */
  readonly caller: string;
  /** Never unlimited: a call without limits does not reach the store. */
  readonly limits: OperationLimits;
}

/** Held concurrency slots; `release` is idempotent. */
export interface Lease {
  release(): void;
}

export type StoreVerdict =
  | { readonly admitted: true; readonly lease: Lease }
  | { readonly admitted: false; readonly limit: LimitName; readonly retryAfterMs: number };

export interface LimitStore {
  /** Sync for memory; a rejected promise (StoreUnavailableError) when the shared store cannot answer. */
  admit(query: AdmissionQuery): StoreVerdict | Promise<StoreVerdict>;
  /** Gives back one request of the caller's rate, admitted before and now not to be counted; best effort. */
  refund?(query: AdmissionQuery): void;
  /** False while the shared store is unreachable. */
  ready(): boolean;
  close(): Promise<void>;
}

export class StoreUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreUnavailableError';
  }
}

export const NO_LEASE: Lease = Object.freeze({ release() {} });
