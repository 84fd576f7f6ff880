// GCRA: a burst at once, then one request per emission interval; a refusal costs nothing.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { gcra } from '../../src/protection/gcra.js';

function run(times: readonly number[], intervalMs: number, burst: number): boolean[] {
  let tat: number | undefined;
  return times.map((now) => {
    const decision = gcra(tat, now, intervalMs, burst);
    if (decision.allowed) tat = decision.tat;
    return decision.allowed;
  });
}

describe('gcra', () => {
  it('allows a burst at once, then one per interval', () => {
    expect(run([0, 0, 0, 0], 100, 3)).toEqual([true, true, true, false]);
    expect(run([0, 0, 0, 99, 100, 150, 200], 100, 3)).toEqual([true, true, true, false, true, false, true]);
  });

  it('says how long until the refused request would pass', () => {
    let tat: number | undefined;
    for (let i = 0; i < 2; i++) tat = gcra(tat, 1000, 500, 2).tat;
    const refused = gcra(tat, 1000, 500, 2);
    expect(refused).toMatchObject({ allowed: false, retryAfterMs: 500 });
    expect(gcra(tat, 1000 + refused.retryAfterMs, 500, 2).allowed).toBe(true);
  });

  it('does not charge refusals: a caller hammering while refused gets in as soon as the rate allows', () => {
    const times = [0, ...Array.from({ length: 50 }, (_, i) => 1 + i), 100];
    const allowed = run(times, 100, 1);
    expect(allowed[0]).toBe(true);
    expect(allowed.slice(1, -1).every((a) => !a)).toBe(true);
    expect(allowed.at(-1)).toBe(true);
  });

  it('a rested caller starts with a full burst (stale state is as good as none)', () => {
    expect(run([0, 0, 10_000, 10_000, 10_000], 100, 2)).toEqual([true, true, true, true, false]);
  });

  it('never admits more than burst + elapsed / interval in any window (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 50 }), { minLength: 1, maxLength: 200 }),
        fc.integer({ min: 1, max: 500 }),
        fc.integer({ min: 1, max: 10 }),
        (gaps, intervalMs, burst) => {
          const times: number[] = [];
          gaps.reduce((at, gap) => {
            times.push(at + gap);
            return at + gap;
          }, 0);
          const allowed = run(times, intervalMs, burst);
          const admittedTimes = times.filter((_, i) => allowed[i]);
          for (let i = 0; i < admittedTimes.length; i++) {
            for (let j = i; j < admittedTimes.length; j++) {
              const admitted = j - i + 1;
              expect(admitted).toBeLessThanOrEqual(
                burst + Math.floor((admittedTimes[j]! - admittedTimes[i]!) / intervalMs),
              );
            }
          }
        },
      ),
    );
  });
});

describe('gcra arithmetic', () => {
  it('never refuses a rested caller, whatever rounding the clock values bring (property)', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 1e13, noNaN: true }),
        fc.double({ min: 0.001, max: 86_400_000, noNaN: true }),
        fc.integer({ min: 1, max: 1000 }),
        (now, intervalMs, burst) => {
          expect(gcra(undefined, now, intervalMs, burst).allowed).toBe(true);
          expect(gcra(now - 1, now, intervalMs, burst).allowed).toBe(true);
        },
      ),
    );
  });
});
