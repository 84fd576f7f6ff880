// The shallow reading of a body as it arrives (body/shallow-fields.ts): the top-level scalars and
// lists of scalars and those of the envelopes one level down, whatever the chunks' boundaries; a
// repeated key keeps its last value, as the participant's decoder does.
import { describe, expect, it } from 'vitest';
import { ShallowFields } from '../../src/body/shallow-fields.js';
import { GatewayError } from '../../src/errors.js';

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
