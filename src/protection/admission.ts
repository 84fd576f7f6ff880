// Admission: may this call start now? The process-wide cap first (a local counter) and the caller's
// share of it, then the operation's limits in the store; a refusal is a coded 429 with Retry-After.
// An admitted call gets a release function, idempotent, that the stage calls when the exchange ends,
// however it ends.
import { performance } from 'node:perf_hooks'; // a module binding: no global lookup per call
import { Errors, GatewayError, secondsText } from '../errors.js';
import { isUnlimited, type ResolvedProtection } from './config.js';
import { SlotCounts } from './slot-counts.js';
import {
  CONCURRENCY_RETRY_AFTER_MS,
  StoreUnavailableError,
  type LimitName,
  type LimitStore,
  type StoreVerdict,
} from './store.js';

export type Release = () => void;

export interface Protection {
  /** Admits a call of `operation` by `caller`, or throws a GatewayError (429, or 503 when failing closed). */
  admit(operation: string, caller: string): Release | Promise<Release>;
  /** Calls admitted and not yet released, in this process. */
  readonly inFlight: number;
  /** False while the shared store cannot answer. */
  storeReady(): boolean;
  close(): Promise<void>;
}

export interface ProtectionOptions {
  readonly onRefusal?: (operation: string, limit: LimitName) => void;
  /** Every store failure (metrics). */
  readonly onStoreFailure?: (failMode: 'open' | 'closed') => void;
  /** A warning at most every `warnIntervalMs`, with the failures since the last one. */
  readonly warn?: (details: { failMode: 'open' | 'closed'; failures: number; error: string }, message: string) => void;
  readonly warnIntervalMs?: number;
  /** Milliseconds (monotonic). */
  readonly now?: () => number;
}

const CAUSES: Record<LimitName, (operation: string) => string> = {
  rate: (operation) => `The rate limit of ${operation} for this caller is reached.`,
  principalConcurrency: (operation) => `This caller already has the most ${operation} calls allowed in flight.`,
  operationConcurrency: (operation) => `The most ${operation} calls allowed are in flight.`,
  gatewayConcurrency: () => 'The gateway has the most calls allowed in flight.',
  gatewayPrincipalConcurrency: () => "This caller already holds its share of the gateway's calls in flight.",
  unauthenticatedRate: () => 'Too many calls without a verified token came from this client address.',
};

/** Retry-After in whole seconds, at least 1 (RFC 9110 §10.2.3). */
export function retryAfterSeconds(retryAfterMs: number): number {
  return Math.max(1, Math.ceil(retryAfterMs / 1000));
}

export function resourceExhausted(operation: string, limit: LimitName, retryAfterMs: number): GatewayError {
  const seconds = retryAfterSeconds(retryAfterMs);
  return new GatewayError(
    Errors.GATEWAY_RESOURCE_EXHAUSTED,
    {
      cause: `${CAUSES[limit](operation)} Retry after ${seconds} s.`,
      context: { operation, limit },
      retryInfo: secondsText(seconds),
    },
    { headers: { 'retry-after': String(seconds) }, reason: `protection: ${limit}` },
  );
}

function protectionUnavailable(operation: string): GatewayError {
  return new GatewayError(
    Errors.GATEWAY_PROTECTION_UNAVAILABLE,
    { cause: 'The gateway cannot check its limits right now.', context: { operation } },
    { headers: { 'retry-after': '1' }, reason: 'protection: limit store unavailable, failing closed' },
  );
}

export function createProtection(
  resolved: ResolvedProtection,
  store: LimitStore | undefined,
  options: ProtectionOptions = {},
): Protection {
  const maxInFlight = resolved.maxInFlight;
  const maxPerCaller = resolved.maxInFlightPerCaller;
  // One caller's slots of the process-wide cap: local like the cap itself, so it holds without Redis.
  const callerSlots = maxPerCaller === undefined ? undefined : new SlotCounts();
  const failMode = resolved.failMode;
  const now = options.now ?? (() => performance.now());
  const warnIntervalMs = options.warnIntervalMs ?? 30_000;
  let inFlight = 0;
  let failuresSinceWarning = 0;
  let lastWarning = Number.NEGATIVE_INFINITY;

  function storeFailed(error: Error): void {
    options.onStoreFailure?.(failMode);
    failuresSinceWarning += 1;
    const at = now();
    if (at - lastWarning < warnIntervalMs) return;
    lastWarning = at;
    options.warn?.(
      { failMode, failures: failuresSinceWarning, error: error.message },
      failMode === 'open'
        ? 'limit store unavailable: admitting calls unchecked (protection.failMode open)'
        : 'limit store unavailable: refusing calls (protection.failMode closed)',
    );
    failuresSinceWarning = 0;
  }

  function admit(operation: string, caller: string): Release | Promise<Release> {
    if (maxInFlight !== undefined && inFlight >= maxInFlight) {
      options.onRefusal?.(operation, 'gatewayConcurrency');
      throw resourceExhausted(operation, 'gatewayConcurrency', CONCURRENCY_RETRY_AFTER_MS);
    }
    if (callerSlots !== undefined && callerSlots.count(caller) >= maxPerCaller!) {
      options.onRefusal?.(operation, 'gatewayPrincipalConcurrency');
      throw resourceExhausted(operation, 'gatewayPrincipalConcurrency', CONCURRENCY_RETRY_AFTER_MS);
    }
    inFlight += 1;
    callerSlots?.take(caller);
    let counted = true;
    const releaseProcessSlot: Release = () => {
      if (!counted) return;
      counted = false;
      inFlight -= 1;
      callerSlots?.give(caller);
    };
    const limits = resolved.limitsOf(operation);
    if (store === undefined || isUnlimited(limits)) return releaseProcessSlot;

    const settle = (verdict: StoreVerdict): Release => {
      if (!verdict.admitted) {
        releaseProcessSlot();
        options.onRefusal?.(operation, verdict.limit);
        throw resourceExhausted(operation, verdict.limit, verdict.retryAfterMs);
      }
      const { lease } = verdict;
      return () => {
        lease.release();
        releaseProcessSlot();
      };
    };
    const fail = (error: unknown): Release => {
      if (!(error instanceof StoreUnavailableError)) {
        releaseProcessSlot();
        throw error;
      }
      storeFailed(error);
      if (failMode === 'open') return releaseProcessSlot;
      releaseProcessSlot();
      throw protectionUnavailable(operation);
    };

    let verdict: StoreVerdict | Promise<StoreVerdict>;
    try {
      verdict = store.admit({ operation, caller, limits });
    } catch (error) {
      return fail(error);
    }
    return verdict instanceof Promise ? verdict.then(settle, fail) : settle(verdict);
  }

  return {
    admit,
    get inFlight() {
      return inFlight;
    },
    storeReady: () => store?.ready() ?? true,
    close: async () => {
      await store?.close();
    },
  };
}
