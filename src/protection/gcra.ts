// The generic cell rate algorithm (GCRA, ITU-T I.371; as in redis-cell and go-redis/redis_rate):
// a caller's whole state is one number, the theoretical arrival time (TAT) of its next request.
// The Redis store runs the same arithmetic in Lua (redis-store.ts); this is the in-memory one.

export interface GcraDecision {
  readonly allowed: boolean;
  /** The caller's new TAT when allowed; unchanged (refusals cost nothing) otherwise. */
  readonly tat: number;
  /** When refused: milliseconds until the same request would be allowed. */
  readonly retryAfterMs: number;
}

/**
 * One request at `now` (ms) against a caller whose TAT is `tat` (undefined: never seen or rested).
 * Allows `burst` requests at once, then one per `intervalMs`.
 */
export function gcra(tat: number | undefined, now: number, intervalMs: number, burst: number): GcraDecision {
  const start = tat === undefined || tat < now ? now : tat;
  // How far ahead of now the caller may run: burst - 1 intervals. Compared as a difference so that a
  // rested caller (start === now) is never refused by floating-point rounding.
  const excess = start - now - intervalMs * (burst - 1);
  if (excess > 0) return { allowed: false, tat: start, retryAfterMs: excess };
  return { allowed: true, tat: start + intervalMs, retryAfterMs: 0 };
}
