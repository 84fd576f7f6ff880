// The stage runner on its own (src/exchange/stage-runner.ts), for both lists: the exchange stages and
// a call's own, which are also handed the call's reply. It stays synchronous (no promise) while every
// stage answers at once, waits on a stage's promise before the next, and stops at the first refusal.
import { describe, expect, it } from 'vitest';
import type { Exchange } from '../../src/exchange/exchange.js';
import { runStages } from '../../src/exchange/stage-runner.js';

const exchange = {} as Exchange;

describe('runStages', () => {
  it('answers undefined, with no promise, when every stage goes on at once, each run once in order', () => {
    const ran: string[] = [];
    const reply = { sent: false };
    const stages = ['a', 'b', 'c'].map((name) => (_exchange: Exchange, got: typeof reply) => {
      expect(got).toBe(reply);
      ran.push(name);
    });
    expect(runStages(stages, exchange, reply)).toBeUndefined();
    expect(ran).toEqual(['a', 'b', 'c']);
  });

  it("waits on a stage's promise before it runs the next, and settles once the rest have run", async () => {
    const ran: string[] = [];
    let release!: () => void;
    const waiting = new Promise<void>((resolve) => (release = resolve));
    const stages = [
      () => void ran.push('a'),
      () => {
        ran.push('b');
        return waiting;
      },
      () => void ran.push('c'),
    ];
    const pending = runStages(stages, exchange, undefined);
    expect(pending).toBeInstanceOf(Promise);
    expect(ran).toEqual(['a', 'b']);
    release();
    await pending;
    expect(ran).toEqual(['a', 'b', 'c']);
  });

  it('stops at the first refusal, thrown at once or rejected later', async () => {
    const ran: string[] = [];
    const refusal = new Error('refused');
    const thrown = [
      () => {
        throw refusal;
      },
      () => void ran.push('after'),
    ];
    expect(() => runStages(thrown, exchange, undefined)).toThrow(refusal);
    const rejected = [() => Promise.reject(refusal), () => void ran.push('after')];
    await expect(runStages(rejected, exchange, undefined)).rejects.toBe(refusal);
    expect(ran).toEqual([]);
  });

  it("hands back the last stage's promise itself (a call's forwarding): no promise chained on it", async () => {
    const ran: string[] = [];
    const forwarding = Promise.resolve();
    const stages = [() => void ran.push('a'), () => forwarding];
    expect(runStages(stages, exchange, undefined)).toBe(forwarding);
    // A stage before the last that waits still chains the rest on its promise.
    const waiting = Promise.resolve();
    const chained = runStages([() => waiting, () => void ran.push('b')], exchange, undefined);
    expect(chained).not.toBe(waiting);
    await chained;
    expect(ran).toEqual(['a', 'b']);
  });
});
