// Limits of one replica, in memory: a GCRA time per caller and operation in a bounded LRU (a rested
// caller's entry is simply stale: no timers), and a count per concurrency key. A key released to 0
// stays until IDLE_KEYS_MAX such keys have gathered, then they are swept: deleting and re-adding a
// key on every burst made V8 shrink and regrow the map's table (about 0.5% of a cached answer, perf).
import { performance } from 'node:perf_hooks'; // a module binding: no global lookup per call
import { LRUCache } from 'lru-cache';
import { gcra } from './gcra.js';
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

/** Concurrency keys kept at a count of 0 before they are swept. */
export const IDLE_KEYS_MAX = 1024;

export function createMemoryStore(options: MemoryStoreOptions): MemoryStore {
  const now = options.now ?? (() => performance.now());
  // A caller's TAT in a box updated in place: a known caller costs one LRU lookup, not a lookup and a set.
  const arrivals = new LRUCache<string, { tat: number }>({ max: options.maxKeys });
  const held = new Map<string, number>();
  /** Keys in `held` whose count is 0. */
  let idle = 0;

  const take = (key: string) => {
    const count = held.get(key);
    if (count === 0) idle -= 1;
    held.set(key, (count ?? 0) + 1);
  };
  const give = (key: string) => {
    const count = (held.get(key) ?? 0) - 1;
    if (count > 0) {
      held.set(key, count);
      return;
    }
    held.set(key, 0);
    idle += 1;
    if (idle > IDLE_KEYS_MAX) {
      for (const [idleKey, idleCount] of held) if (idleCount === 0) held.delete(idleKey);
      idle = 0;
    }
  };

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
      if (perPrincipal !== undefined && (held.get(callerKey) ?? 0) >= perPrincipal) {
        return { admitted: false, limit: 'principalConcurrency', retryAfterMs: CONCURRENCY_RETRY_AFTER_MS };
      }
      const perOperation = limits.maxInFlight;
      if (perOperation !== undefined && (held.get(operation) ?? 0) >= perOperation) {
        return { admitted: false, limit: 'operationConcurrency', retryAfterMs: CONCURRENCY_RETRY_AFTER_MS };
      }
      // Every check passed: only now is anything counted, so a refusal costs the caller nothing.
      if (nextArrival !== undefined) {
        if (arrival !== undefined) arrival.tat = nextArrival;
        else arrivals.set(callerKey, { tat: nextArrival });
      }
      if (perPrincipal !== undefined) take(callerKey);
      if (perOperation !== undefined) take(operation);
      let released = false;
      return {
        admitted: true,
        lease: {
          release() {
            if (released) return;
            released = true;
            if (perPrincipal !== undefined) give(callerKey);
            if (perOperation !== undefined) give(operation);
          },
        },
      };
    },
    ready: () => true,
    close: async () => {
      arrivals.clear();
      held.clear();
      idle = 0;
    },
    get heldKeys() {
      return held.size - idle;
    },
    get keptKeys() {
      return held.size;
    },
  };
}
