// One caller's share of the trail in bytes (audit.callerBytesPerMinute): a bucket per caller,
// refilled at its rate, forgotten once full again.
import { describe, expect, it } from 'vitest';
import { CallerShare } from '../../src/audit/caller-share.js';

describe('a caller share of the trail', () => {
  it('takes bytes while they fit, refills at bytesPerMinute, and says when a write fits again', () => {
    const share = new CallerShare(6000); // 100 bytes a second
    expect(share.take('alice', 4000, 0)).toBe(true);
    expect(share.take('alice', 2500, 0)).toBe(false); // 2,000 left
    expect(share.take('bob', 6000, 0)).toBe(true); // a share each
    expect(share.retryAfterSeconds('alice', 2500, 0)).toBe(5);
    expect(share.take('alice', 2500, 5_000)).toBe(true);
    // An outcome of a forwarded write is spent whatever is left: the next write waits longer.
    share.spend('alice', 1000, 5_000);
    expect(share.take('alice', 100, 5_000)).toBe(false);
    expect(share.retryAfterSeconds('alice', 100, 5_000)).toBe(11);
    // Never more than a minute's worth: a long-idle caller starts full, not richer.
    expect(share.take('alice', 6001, 3_600_000)).toBe(false);
    expect(share.take('alice', 6000, 3_600_000)).toBe(true);
  });

  it('gives back what the trail could not write, never past a full share', () => {
    const share = new CallerShare(6000);
    expect(share.take('alice', 5000, 0)).toBe(true);
    share.refund('alice', 4000, 0);
    expect(share.take('alice', 5000, 0)).toBe(true);
    share.refund('alice', 60_000, 0);
    expect(share.take('alice', 6001, 0)).toBe(false);
    expect(share.take('alice', 6000, 0)).toBe(true);
  });

  it('forgets callers whose share is full again (memory bounded by the callers of the last minute)', () => {
    const share = new CallerShare(6000);
    for (let n = 0; n < 1000; n++) share.take(`caller-${n}`, 10, 0);
    expect(share.size).toBe(1000);
    share.take('late', 10, 61_000);
    expect(share.size).toBe(1);
  });

  it('0: no share', () => {
    const share = new CallerShare(0);
    expect(share.take('alice', 1 << 30)).toBe(true);
    expect(share.size).toBe(0);
  });
});
