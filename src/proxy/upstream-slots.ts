// The upstream pool's connections as slots: a call takes one before it is handed to the pool, so the
// pool is never handed more calls than it has connections; the others wait here, oldest first, each
// until its deadline. In undici's own queue no timeout runs (headersTimeout starts once a call is
// written) and a call cannot be taken back before it starts: one answered 503 there kept its request
// and reply (about 10 KB) until a connection freed.
import { performance } from 'node:perf_hooks';

/** A call waiting for a slot (every one taken). */
export interface SlotWaiter {
  /** performance.now() time after which it is no longer started. */
  readonly deadline: number;
  /** A slot is its own now: hand the call to the pool. */
  start(): void;
  /** Its deadline passed first, or the slots are closing: answer it. */
  expire(): void;
}

/** How often waiting calls are checked against their deadline. */
const SWEEP_MS = 100;

export class UpstreamSlots {
  private taken = 0;
  private readonly waiting = new Set<SlotWaiter>(); // insertion order: a FIFO that can drop any entry
  private pumping = false;
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    readonly size: number,
    sweepMs = SWEEP_MS,
  ) {
    this.sweeper = setInterval(this.sweep, sweepMs);
    this.sweeper.unref();
  }

  /** Slots taken: calls handed to the pool and not yet ended there. */
  get inFlight(): number {
    return this.taken;
  }

  /** Calls waiting for a slot. */
  get queued(): number {
    return this.waiting.size;
  }

  /** Takes a free slot, if there is one; the caller releases it once its call has ended. */
  tryTake(): boolean {
    if (this.taken >= this.size) return false;
    this.taken++;
    return true;
  }

  /** Queues a call for the next free slot; its start() runs with the slot already taken. */
  wait(waiter: SlotWaiter): void {
    this.waiting.add(waiter);
  }

  /** Drops a waiting call (its client left): it is neither started nor expired. */
  cancel(waiter: SlotWaiter): void {
    this.waiting.delete(waiter);
  }

  /** A call's slot is free again: the oldest waiting calls take the free slots. */
  release(): void {
    this.taken--;
    // After the releasing callback has returned (undici's: no dispatch from inside it), and only when calls wait.
    if (this.waiting.size !== 0 && !this.pumping) {
      this.pumping = true;
      queueMicrotask(this.pump);
    }
  }

  /** Stops the sweeps; every waiting call is expired (it will not get a slot). */
  close(): void {
    clearInterval(this.sweeper);
    for (const waiter of this.waiting) waiter.expire();
    this.waiting.clear();
  }

  private readonly pump = (): void => {
    this.pumping = false;
    const now = performance.now();
    for (const waiter of this.waiting) {
      if (this.taken >= this.size) return;
      this.waiting.delete(waiter);
      // Past its deadline but not yet swept: expired as promised, never started.
      if (waiter.deadline <= now) {
        waiter.expire();
        continue;
      }
      this.taken++;
      waiter.start();
    }
  };

  private readonly sweep = (): void => {
    if (this.waiting.size === 0) return;
    const now = performance.now();
    for (const waiter of this.waiting) {
      if (waiter.deadline > now) continue;
      this.waiting.delete(waiter);
      waiter.expire();
    }
  };
}
