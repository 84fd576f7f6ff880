// One caller's share of the trail, in bytes: a token bucket per caller (the token's subject, or the
// client address for a call without one: exchange/caller.ts) holding audit.callerBytesPerMinute,
// refilled at that rate. A write's records spend it (given back for a record the trail could not
// write); a write whose intent would overdraw it is over its share (refused in failMode closed,
// recorded without its body and fields in open), so that one token holder cannot fill the trail's
// volume (it can bring its oldest files to retention sooner).
// The outcome of a write that was forwarded is always written, and may overdraw the share.
import { performance } from 'node:perf_hooks';

interface Bucket {
  bytes: number;
  at: number;
}

/** How often buckets that have filled up again are forgotten. */
const SWEEP_MS = 60_000;

export class CallerShare {
  private readonly buckets = new Map<string, Bucket>();
  private readonly perMs: number;
  private lastSweep = Number.NEGATIVE_INFINITY;

  /** `bytesPerMinute` 0: no share (every write may add any size). */
  constructor(private readonly bytesPerMinute: number) {
    this.perMs = bytesPerMinute / 60_000;
  }

  /** Whether `bytes` more fit in the caller's share now; they are spent when they do. */
  take(caller: string, bytes: number, now = performance.now()): boolean {
    if (this.bytesPerMinute === 0) return true;
    const bucket = this.refilled(caller, now);
    if (bucket.bytes < bytes) return false;
    bucket.bytes -= bytes;
    return true;
  }

  /** Spends `bytes` whatever is left (an outcome of a forwarded write). */
  spend(caller: string, bytes: number, now = performance.now()): void {
    if (this.bytesPerMinute === 0) return;
    this.refilled(caller, now).bytes -= bytes;
  }

  /** Gives back `bytes` spent on records the trail could not write: a share counts what is on disk. */
  refund(caller: string, bytes: number, now = performance.now()): void {
    if (this.bytesPerMinute === 0) return;
    const bucket = this.refilled(caller, now);
    bucket.bytes = Math.min(this.bytesPerMinute, bucket.bytes + bytes);
  }

  /** Whole seconds until the caller's share holds `bytes` again (at least 1). */
  retryAfterSeconds(caller: string, bytes: number, now = performance.now()): number {
    const left = this.bytesPerMinute === 0 ? bytes : this.refilled(caller, now).bytes;
    const missing = Math.min(bytes, this.bytesPerMinute) - left;
    return Math.max(1, Math.ceil(missing / this.perMs / 1000));
  }

  /** Callers with a share in use (for tests and the sweep). */
  get size(): number {
    return this.buckets.size;
  }

  private refilled(caller: string, now: number): Bucket {
    if (now - this.lastSweep >= SWEEP_MS) this.sweep(now);
    let bucket = this.buckets.get(caller);
    if (bucket === undefined) {
      bucket = { bytes: this.bytesPerMinute, at: now };
      this.buckets.set(caller, bucket);
      return bucket;
    }
    bucket.bytes = Math.min(this.bytesPerMinute, bucket.bytes + (now - bucket.at) * this.perMs);
    bucket.at = now;
    return bucket;
  }

  /** Forgets the callers whose share has filled up again: a new bucket is the same. */
  private sweep(now: number): void {
    this.lastSweep = now;
    for (const [caller, bucket] of this.buckets)
      if (bucket.bytes + (now - bucket.at) * this.perMs >= this.bytesPerMinute) this.buckets.delete(caller);
  }
}
