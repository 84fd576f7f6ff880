// The upstream slots on their own: a call takes a slot or waits, oldest first, at most until its deadline.
import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it } from 'vitest';
import { UpstreamSlots, type SlotWaiter } from '../../src/proxy/upstream-slots.js';

const opened: UpstreamSlots[] = [];
afterEach(() => {
  for (const slots of opened.splice(0)) slots.close();
});

function slotsOf(size: number, sweepMs = 20): UpstreamSlots {
  const slots = new UpstreamSlots(size, sweepMs);
  opened.push(slots);
  return slots;
}

/** A waiting call that records what happened to it, in `log`. */
function waiter(name: string, log: string[], deadlineInMs = 10_000): SlotWaiter {
  return {
    deadline: performance.now() + deadlineInMs,
    start: () => log.push(`${name} started`),
    expire: () => log.push(`${name} expired`),
  };
}

const microtasks = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('upstream slots', () => {
  it('gives out as many slots as it has, then none until one is released', () => {
    const slots = slotsOf(2);
    expect([slots.tryTake(), slots.tryTake(), slots.tryTake()]).toEqual([true, true, false]);
    expect(slots.inFlight).toBe(2);
    slots.release();
    expect(slots.tryTake()).toBe(true);
    expect(slots.inFlight).toBe(2);
  });

  it('starts waiting calls oldest first, one per released slot, after the releasing call has returned', async () => {
    const slots = slotsOf(1);
    const log: string[] = [];
    slots.tryTake();
    slots.wait(waiter('a', log));
    slots.wait(waiter('b', log));
    expect(slots.queued).toBe(2);
    slots.release();
    expect(log).toEqual([]); // not from inside release(): undici must not be dispatched to from its own callback
    await microtasks();
    expect(log).toEqual(['a started']);
    expect([slots.inFlight, slots.queued]).toEqual([1, 1]); // the started call holds the slot
    slots.release();
    await microtasks();
    expect(log).toEqual(['a started', 'b started']);
  });

  it('expires a waiting call past its deadline when a slot frees before the sweep; the next gets it', async () => {
    const slots = slotsOf(1, 60_000); // no sweep during the test
    const log: string[] = [];
    slots.tryTake();
    slots.wait(waiter('late', log, 5));
    slots.wait(waiter('next', log));
    await new Promise((resolve) => setTimeout(resolve, 20));
    slots.release();
    await microtasks();
    expect(log).toEqual(['late expired', 'next started']);
    expect(slots.inFlight).toBe(1);
  });

  it('sweeps a waiting call whose deadline passes while every slot stays taken', async () => {
    const slots = slotsOf(1);
    const log: string[] = [];
    slots.tryTake();
    slots.wait(waiter('short', log, 30));
    slots.wait(waiter('long', log));
    await expect.poll(() => log, { timeout: 1_000, interval: 10 }).toEqual(['short expired']);
    expect(slots.queued).toBe(1);
  });

  it('drops a cancelled call: neither started nor expired', async () => {
    const slots = slotsOf(1);
    const log: string[] = [];
    slots.tryTake();
    const leaving = waiter('leaving', log, 30);
    slots.wait(leaving);
    slots.cancel(leaving);
    await new Promise((resolve) => setTimeout(resolve, 80)); // past its deadline and a few sweeps
    slots.release();
    await microtasks();
    expect(log).toEqual([]);
    expect([slots.inFlight, slots.queued]).toEqual([0, 0]);
  });

  it('expires every waiting call when closed', () => {
    const slots = slotsOf(1);
    const log: string[] = [];
    slots.tryTake();
    slots.wait(waiter('a', log));
    slots.wait(waiter('b', log));
    slots.close();
    expect(log).toEqual(['a expired', 'b expired']);
    expect(slots.queued).toBe(0);
  });
});
