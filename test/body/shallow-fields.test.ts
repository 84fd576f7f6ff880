// The shallow reading of a body as it arrives (body/shallow-fields.ts): the top-level scalars and
// lists of scalars and those of the envelopes one level down, whatever the chunks' boundaries; a
// repeated key keeps its last value, as the participant's decoder does.
import { describe, expect, it } from 'vitest';
import { ShallowFields } from '../../src/body/shallow-fields.js';
import { Errors, GatewayError } from '../../src/errors.js';

/** The shallow object of `text` written in chunks of `size` bytes, or the refusal's code. */
function read(text: string, size: number, maxDepth = 32): unknown {
  const fields = new ShallowFields(maxDepth, new Set(['userId']));
  const bytes = Buffer.from(text);
  try {
    for (let at = 0; at < bytes.length; at += size) fields.write(bytes.subarray(at, at + size));
    return fields.end();
  } catch (error) {
    return (error as GatewayError).definition.code;
  }
}

describe('ShallowFields', () => {
  const body =
    '{"commands":[{"CreateCommand":{"templateId":"a:b:c"}}],"userId":"al\\u00e9 😀","actAs":["x","y"],"n":-1.5e3,"ok":true,"none":null,' +
    '"reassignmentCommands":{"userId":"bob","commands":[],"deep":{"userId":"carol"}}}';

  it('keeps the top-level and envelope fields, the same at every chunk size', () => {
    const expected = {
      commands: [{ CreateCommand: { templateId: 'a:b:c' } }],
      userId: 'alé 😀',
      actAs: ['x', 'y'],
      n: -1500,
      ok: true,
      none: null,
      reassignmentCommands: { userId: 'bob', commands: [], deep: { userId: 'carol' } },
    };
    for (const size of [1, 2, 3, 7, 64, 4096]) expect(read(body, size), `chunks of ${size}`).toEqual(expected);
  });

  it('keeps the last value of a repeated key, at the top and in an envelope', () => {
    expect(read('{"userId":"alice","userId":"mallory"}', 5)).toEqual({ userId: 'mallory' });
    expect(read('{"userId":{"a":1},"userId":"mallory"}', 5)).toEqual({ userId: 'mallory' });
    expect(read('{"c":{"userId":"alice","userId":"mallory"}}', 5)).toEqual({ c: { userId: 'mallory' } });
  });

  it('keeps four levels and 10,000 values, but always the userId a rule reads', () => {
    const many = Array.from({ length: 20_000 }, (_, i) => `"k${i}":${i}`).join(',');
    const kept = read(`{"userId":"alice",${many},"a":{"b":[{"c":{"d":1},"e":2}]},"userId":"mallory"}`, 4096) as Record<
      string,
      unknown
    >;
    expect(Object.keys(kept)).toHaveLength(10_000);
    expect(kept.userId).toBe('mallory');
    expect(read('{"a":{"b":[{"c":{"d":1},"e":2}]}}', 3)).toEqual({ a: { b: [{ e: 2 }] } });
  });

  it('cuts kept strings at 513 characters and lists at 101 items (one more than the audit trail records, so it names its cut), never a key a rule reads', () => {
    const kept = read(
      `{"a":"${'x'.repeat(1_000)}","b":[${Array.from({ length: 300 }, (_, i) => i).join(',')}]}`,
      100,
    ) as {
      a: string;
      b: number[];
    };
    expect(kept.a).toHaveLength(513);
    expect(kept.b).toHaveLength(101);
    const userId = 'u'.repeat(2_000);
    const fields = new ShallowFields(100, new Set(['userId']));
    fields.write(Buffer.from(JSON.stringify({ userId })));
    expect(fields.end().userId).toBe(userId);
  });

  it('reads malformed UTF-8 as the participant does (U+FFFD, as Buffer#toString), at every chunk size', () => {
    const bytes = Buffer.concat([
      Buffer.from('{"userId":"u","x":"a'),
      Buffer.from([0xff, 0xfe, 0x41, 0xe2, 0x82]), // two bad bytes, A, a euro sign cut short
      Buffer.from('","y":"é😀"}'),
    ]);
    const expected = JSON.parse(bytes.toString('utf8')) as unknown;
    for (const size of [1, 2, 3, 5, 64]) {
      const fields = new ShallowFields(32, new Set(['userId']));
      for (let at = 0; at < bytes.length; at += size) fields.write(bytes.subarray(at, at + size));
      expect(fields.end(), `chunks of ${size}`).toEqual(expected);
    }
  });

  describe('counts what long tokens hold (the tokenizer builds each whole before it is emitted)', () => {
    const KiB = 1024;
    /** What `countText` was asked to count for `bytes` in chunks of `size`, and the shallow object. */
    function counted(bytes: Buffer, size: number) {
      let total = 0;
      const fields = new ShallowFields(32, new Set(['userId']), (count) => void (total += count));
      for (let at = 0; at < bytes.length; at += size) fields.write(bytes.subarray(at, at + size));
      return { total, body: fields.end() };
    }
    const long = (length: number, unit = 'w') => unit.repeat(length / unit.length);

    /** Three times the bytes past 64 KiB of each long token, counted at the chunks' ends: within a chunk each way. */
    function expectAbout(total: number, lengths: number[], size: number) {
      const exact = lengths.reduce((sum, length) => sum + 3 * (length - 64 * KiB), 0);
      const slack = lengths.length * 3 * (size + 8);
      expect(total, `chunks of ${size}`).toBeGreaterThanOrEqual(exact - slack);
      expect(total, `chunks of ${size}`).toBeLessThanOrEqual(exact + slack);
    }

    it('three times the bytes of each string or number past its first 64 KiB, nothing for short strings, at every chunk size', () => {
      const body = Buffer.from(`{"a":"${long(200 * KiB)}","b":["x","y"],"userId":"u","c":"${long(70 * KiB)}"}`);
      for (const size of [7, 1000, 64 * KiB, body.length])
        expectAbout(counted(body, size).total, [200 * KiB, 70 * KiB], size);
      const number = Buffer.from(`{"userId":"u","n":${'1'.repeat(100 * KiB)}}`);
      expectAbout(counted(number, 4096).total, [100 * KiB], 4096);
      const many = Buffer.from(JSON.stringify({ userId: 'u', list: Array.from({ length: 5_000 }, () => long(1024)) }));
      expect(counted(many, 4096).total).toBe(0);
    });

    it('reads escaped quotes and runs of backslashes as the string going on, across chunk boundaries', () => {
      // Escaped quotes after escaped backslashes, then a string of 80 KiB of backslashes (an even run: the quote after it closes).
      const inside = long(100 * KiB, 'ab\\\\\\"c'); // JSON text ab\\\"c: an escaped backslash, an escaped quote
      const body = Buffer.from(`{"userId":"u","a":"${inside}","after":"${long(80 * KiB, '\\')}"}`);
      const parsed = JSON.parse(body.toString()) as { a: string; after: string };
      expect([parsed.a.slice(0, 5), parsed.after.length]).toEqual(['ab\\"c', 40 * KiB]);
      for (const size of [1, 3, 5, 6, 4096]) {
        const { total, body: read } = counted(body, size);
        expectAbout(total, [inside.length, 80 * KiB], size);
        expect(read.userId).toBe('u');
      }
    });

    it("refuses the body with the budget's refusal once a count is refused", () => {
      const refusal = new GatewayError(Errors.GATEWAY_BODY_BUFFER_EXHAUSTED, { cause: 'full' });
      const fields = new ShallowFields(32, new Set(['userId']), (count) => (count > 0 ? refusal : undefined));
      const body = Buffer.from(`{"userId":"u","a":"${long(100 * KiB)}"}`);
      expect(() => {
        for (let at = 0; at < body.length; at += 4096) fields.write(body.subarray(at, at + 4096));
      }).toThrow(refusal);
    });
  });

  it("refuses what the participant's decoder refuses, and nesting past maxDepth as the gateway does", () => {
    expect(read('', 4)).toBe('DECODE_FAILURE');
    expect(read('[1]', 4)).toBe('DECODE_FAILURE');
    expect(read('{"a":1}{}', 4)).toBe('DECODE_FAILURE');
    expect(read('{"a":', 4)).toBe('DECODE_FAILURE');
    expect(read('{"a":tru}', 4)).toBe('DECODE_FAILURE');
    expect(read(`{"a":${'['.repeat(40)}${']'.repeat(40)}}`, 4)).toBe('GATEWAY_MALFORMED_REQUEST');
    expect(read(`{"a":${'['.repeat(30)}${']'.repeat(30)}}`, 4)).toEqual({ a: [[[]]] });
  });
});
