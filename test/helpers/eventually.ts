// Waits for what a test's stand-in counts (the calls a recording upstream received, its probes, a
// key set's fetches, a gauge) instead of sleeping a fixed time: vitest's expect.poll, with the bounds
// these tests use and the thing waited for named when it never comes. A fixed sleep stays only where
// a test shows that something does NOT happen within a time.
import { expect } from 'vitest';

export interface EventuallyOptions {
  /** How long to wait at most (ms). */
  readonly withinMs?: number;
  /** How often `check` is asked (ms). */
  readonly everyMs?: number;
}

/** Settles once `check` holds; fails naming `what` when it has not within `withinMs`. */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  what: string,
  { withinMs = 5_000, everyMs = 20 }: EventuallyOptions = {},
): Promise<void> {
  await expect.poll(check, { timeout: withinMs, interval: everyMs, message: `never: ${what}` }).toBe(true);
}
