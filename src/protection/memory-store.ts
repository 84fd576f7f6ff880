// Limits of one replica, in memory: a GCRA time per caller and operation in a bounded LRU (a rested
// caller's entry is simply stale: no timers), and a count per concurrency key (slot-counts.ts).
import { performance } from 'node:perf_hooks'; // a module binding: no global lookup per call
import { LRUCache } from 'lru-cache';
import { gcra } from './gcra.js';
import { SlotCounts } from './slot-counts.js';
import { CONCURRENCY_RETRY_AFTER_MS, type AdmissionQuery, type LimitStore, type StoreVerdict } from './store.js';

export interface MemoryStoreOptions {
  /** Rate states kept; the least recently used is forgotten first (that caller starts rested). */
  readonly maxKeys: number;
  /** Milliseconds, monotonic. */
  readonly now?: () => number;
}

export interface MemoryStore extends LimitStore {
  /** Concurrency keys currently held (tests: no slot leaks). */
  readonly heldKeys: number;
  /** Concurrency keys in memory: the held ones and up to IDLE_KEYS_MAX released to 0. */
  readonly keptKeys: number;
}

export { IDLE_KEYS_MAX } from './slot-counts.js';

export function createMemoryStore(options: MemoryStoreOptions): MemoryStore {
  const now = options.now ?? (() => performance.now());
  // A caller's TAT in a box updated in place: a known caller costs one LRU lookup, not a lookup and a set.
  const arrivals = new LRUCache<string, { tat: number }>({ max: options.maxKeys });
  const held = new SlotCounts();

  return {
    admit({ operation, caller, limits }: AdmissionQuery): StoreVerdict {
      const callerKey = `${operation}\u0000${caller}`;
      let nextArrival: number | undefined;
      let arrival: { tat: number } | undefined;
      if (limits.rate !== undefined) {
        arrival = arrivals.get(callerKey);
        const decision = gcra(arrival?.tat, now(), limits.rate.intervalMs, limits.rate.burst);
        if (!decision.allowed) return { admitted: false, limit: 'rate', retryAfterMs: decision.retryAfterMs };
        nextArrival = decision.tat;
      }
      const perPrincipal = limits.maxInFlightPerPrincipal;
      if (perPrincipal !== undefined && held.count(callerKey) >= perPrincipal) {
        return { admitted: false, limit: 'principalConcurrency', retryAfterMs: CONCURRENCY_RETRY_AFTER_MS };
      }
      const perOperation = limits.maxInFlight;
      if (perOperation !== undefined && held.count(operation) >= perOperation) {
        return { admitted: false, limit: 'operationConcurrency', retryAfterMs: CONCURRENCY_RETRY_AFTER_MS };
      }
      // Every check passed: only now is anything counted, so a refusal costs the caller nothing.
      if (nextArrival !== undefined) {
        if (arrival !== undefined) arrival.tat = nextArrival;
        else arrivals.set(callerKey, { tat: nextArrival });
      }
      if (perPrincipal !== undefined) held.take(callerKey);
      if (perOperation !== undefined) held.take(operation);
      let released = false;
      return {
        admitted: true,
        lease: {
          release() {
            if (released) return;
            released = true;
            if (perPrincipal !== undefined) held.give(callerKey);
            if (perOperation !== undefined) held.give(operation);
          },
        },
      };
    },
    ready: () => true,
    close: async () => {
      arrivals.clear();
      held.clear();
    },
    get heldKeys() {
      return held.heldKeys;
    },
    get keptKeys() {
      return held.keptKeys;
    },
  };
}
