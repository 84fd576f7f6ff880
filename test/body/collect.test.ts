// What large bodies leave behind is collected once their holders let it go past a bound
// (body/collect.ts), not when V8 next chooses to: a large body's parse turn asks for it.
import { getHeapStatistics } from 'node:v8';
import { describe, expect, it } from 'vitest';
import { BodyBudget } from '../../src/body/budget.js';
import { EVENT_LOOP_GARBAGE_BYTES, eventLoopGarbage, garbageBound } from '../../src/body/collect.js';
import { PARSED_AT_ONCE_BYTES, parseInTurn } from '../../src/body/parse-turns.js';

const MiB = 1024 * 1024;
const outsideHeap = () => getHeapStatistics().external_memory;

/** `count` strings of 4 MiB each, held outside the heap (as a decoded body's text is), then dropped. */
function externalGarbage(count: number): number {
  const texts = Array.from({ length: count }, (_, i) => Buffer.alloc(4 * MiB, 0x61 + i).toString('latin1'));
  return texts.reduce((sum, text) => sum + text.length, 0); // dropped on return
}

/** A tree of some 45 MiB in the heap (a body's, parsed), dropped once built. */
function heapGarbage(): void {
  const tree = Array.from({ length: 1_000_000 }, (_, i) => ({ i, name: `n${i}` }));
  expect(tree).toHaveLength(1_000_000); // dropped on return
}

describe('garbageBound', () => {
  it('collects at once what was let go past its bound: the memory outside the heap is given back', () => {
    // From a collected heap: a marking V8 began before (other files' garbage in this worker) keeps
    // what is allocated while it runs, and the collection asked for would only finish that marking.
    garbageBound(0).letGo(1);
    const bound = garbageBound(16 * MiB);
    const before = outsideHeap();
    const dropped = externalGarbage(6); // 24 MiB
    expect(outsideHeap() - before).toBeGreaterThanOrEqual(dropped - MiB); // V8 alone has not collected it
    bound.letGo(dropped);
    expect(bound.collections()).toBe(1);
    expect(outsideHeap() - before).toBeLessThan(4 * MiB);
  });

  it('does not collect while what was let go stays within its bound', () => {
    const bound = garbageBound(64 * MiB);
    bound.letGo(externalGarbage(2));
    bound.letGo(4 * MiB);
    expect(bound.collections()).toBe(0);
  });

  it("counts the heap's growth since the last collection: a tree let go", () => {
    const bound = garbageBound(8 * MiB);
    heapGarbage();
    bound.letGo();
    expect(bound.collections()).toBe(1);
    bound.letGo(); // nothing more since
    expect(bound.collections()).toBe(1);
  });
});

describe('the event loop bound', () => {
  it('is asked after a large body is parsed in its turn, for the tree it leaves', async () => {
    eventLoopGarbage().letGo(EVENT_LOOP_GARBAGE_BYTES + 1); // a collection: the heap's growth counts from here
    const before = eventLoopGarbage().collections();
    await parseInTurn('alice', PARSED_AT_ONCE_BYTES + 1, heapGarbage);
    expect(eventLoopGarbage().collections()).toBe(before + 1);
  });

  it("is told of a large body's bytes once its hold is released: held bodies let go past the bound are collected", async () => {
    eventLoopGarbage().letGo(EVENT_LOOP_GARBAGE_BYTES + 1); // a collection: counting starts from here
    const before = eventLoopGarbage().collections();
    const budget = new BodyBudget({ bufferedBodyBytes: 64 * MiB, bufferedBodyShare: 1 });
    for (let body = 0; body < 5; body++) {
      const hold = budget.hold('caller');
      expect(hold.take(8 * MiB)).toBeUndefined();
      hold.release();
    }
    await new Promise((resolve) => setImmediate(resolve)); // told once the exchange has let go of it
    expect(eventLoopGarbage().collections()).toBe(before + 1);
  });
});

