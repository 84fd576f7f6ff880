// Large bodies are parsed one per turn of the event loop, round the callers, the loop left to others
// between two (body/parse-turns.ts); small ones at once.
import { describe, expect, it } from 'vitest';
import { PARSED_AT_ONCE_BYTES, parseInTurn, parsesWaiting } from '../../src/body/parse-turns.js';

const LARGE = PARSED_AT_ONCE_BYTES + 1;

/** A large body's parse: always a promise. */
const inTurn = <T>(caller: string, parse: () => T) => parseInTurn(caller, LARGE, parse) as Promise<T>;

/** Spins for `ms` milliseconds: a parse that holds the loop. */
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

describe('parseInTurn', () => {
  it('parses a small body at once', () => {
    expect(parseInTurn('a', PARSED_AT_ONCE_BYTES, () => 42)).toBe(42);
  });

  it('parses large bodies one per turn, round the callers, with the loop served between two', async () => {
    const order: string[] = [];
    const job = (name: string) => () => {
      order.push(name);
      busy(5);
      // Something else the loop has to do, asked for during this parse.
      setTimeout(() => order.push(`other after ${name}`), 0);
      return name;
    };
    const parsed = [
      inTurn('alice', job('alice 1')),
      inTurn('alice', job('alice 2')),
      inTurn('alice', job('alice 3')),
      inTurn('bob', job('bob 1')),
    ];
    expect(parsesWaiting()).toBe(4);
    expect(order).toEqual([]); // none at once
    expect(await Promise.all(parsed)).toEqual(['alice 1', 'alice 2', 'alice 3', 'bob 1']);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(order).toEqual([
      'alice 1',
      'other after alice 1',
      'bob 1',
      'other after bob 1',
      'alice 2',
      'other after alice 2',
      'alice 3',
      'other after alice 3',
    ]);
    expect(parsesWaiting()).toBe(0);
  });

  it('leaves the loop to others for twice as long as a parse took before the next one', async () => {
    const started: number[] = [];
    const job = () => {
      started.push(performance.now());
      busy(20);
    };
    await Promise.all([inTurn('a', job), inTurn('b', job)]);
    expect(started[1]! - started[0]!).toBeGreaterThanOrEqual(20 + 40 - 2);
  });

  it('rejects only the parse that threw; the others run', async () => {
    const failing = inTurn('a', () => {
      throw new Error('not JSON');
    });
    const next = inTurn('a', () => 'fine');
    await expect(failing).rejects.toThrow('not JSON');
    await expect(next).resolves.toBe('fine');
  });
});
