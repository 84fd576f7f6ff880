// The request id: a random UUID v4 in the form crypto.randomUUID() gives, every call a new one.
import { describe, expect, it } from 'vitest';
import { randomRequestId } from '../../src/exchange/request-id.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('randomRequestId', () => {
  it('makes version 4 UUIDs, each different, across many batches of random bytes', () => {
    const ids = Array.from({ length: 100_000 }, () => randomRequestId());
    expect(ids.filter((id) => !UUID_V4.test(id))).toEqual([]);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('draws every character from the random bytes: each free hex digit takes all 16 values, the variant digit its 4', () => {
    const seen = Array.from({ length: 36 }, () => new Set<string>());
    for (let n = 0; n < 20_000; n++) {
      const id = randomRequestId();
      for (let i = 0; i < 36; i++) seen[i]!.add(id[i]!);
    }
    const sizes = seen.map((values) => values.size);
    const expected = Array.from({ length: 36 }, (_, i) =>
      [8, 13, 18, 23].includes(i) ? 1 : i === 14 ? 1 : i === 19 ? 4 : 16,
    );
    expect(sizes).toEqual(expected);
  });
});
