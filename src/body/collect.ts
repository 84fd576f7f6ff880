// What a large body leaves behind once judged (a worker's text and tree, a bomb's tree on the event
// loop) is garbage V8 collects when it chooses: memory outside the heap once 64 MiB more of it is held
// than after the last full collection (V8's kExternalAllocationSoftLimit), the heap as it grows, each
// thread for itself. Under 16 callers of 8 MiB rule-checked bodies the worker held three to four
// bodies' texts and trees at once, and eight 1 MiB bombs left their trees to pile up on the event
// loop (docs/performance.md, "Large rule-checked bodies"). So a thread done with a large body asks for
// a full collection once what it let go passes a bound: off the loop in the worker, and on it in a
// large parse's own turn, whose pause the turns count (body/parse-turns.ts), and once held bodies of
// 1 MiB or more let go pass it (body/budget.ts): 16 callers of 8 MiB rule-checked bodies left up to
// 64 MiB of them resident, for a pause of some 70 ms per 32 MiB collected (docs/performance.md).
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

let fullCollection: (() => void) | undefined;

/**
 * V8's own gc(), taken from a context made while --expose-gc is on (only contexts made then see it);
 * the flag is turned off again at once, so no other context does.
 */
function collectGarbage(): void {
  if (fullCollection === undefined) {
    setFlagsFromString('--expose-gc');
    fullCollection = runInNewContext('gc') as () => void;
    setFlagsFromString('--no-expose-gc');
  }
  fullCollection();
}

/** The heap in use, in bytes. */
const heapUsed = () => getHeapStatistics().used_heap_size;

export interface GarbageBound {
  /**
   * Counts `bytes` of memory outside the heap just let go (a body's buffers, a worker's text), and
   * collects now when that and the heap's growth since the last collection pass the bound (a few
   * microseconds when they do not). Call it where a large body has just been let go.
   */
  readonly letGo: (bytes?: number) => void;
  /** How many full collections it asked for. */
  readonly collections: () => number;
}

/**
 * A bound of `bytes` on the garbage large bodies leave in this thread between two full collections:
 * what they held outside the heap, as counted by their holders (V8 cannot tell what of it is garbage
 * yet), and the heap's growth (their trees).
 */
export function garbageBound(bytes: number): GarbageBound {
  let heapAfter = heapUsed();
  let outside = 0;
  let collections = 0;
  return {
    letGo(released = 0) {
      outside += released;
      if (outside + heapUsed() - heapAfter <= bytes) return;
      collectGarbage();
      collections++;
      outside = 0;
      heapAfter = heapUsed();
    },
    collections: () => collections,
  };
}

/** The bound on the event loop: the trees of bodies parsed in turns of their own (body/parse-turns.ts). */
export const EVENT_LOOP_GARBAGE_BYTES = 32 * 1024 * 1024;

let eventLoopBound: GarbageBound | undefined;

/** This thread's bound (one per thread: a collection by one caller resets it for all). */
export function eventLoopGarbage(): GarbageBound {
  return (eventLoopBound ??= garbageBound(EVENT_LOOP_GARBAGE_BYTES));
}
