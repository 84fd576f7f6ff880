import { describe, expect, it } from 'vitest';
import { JsonSyntaxError, parseJsonPreservingInt64 } from '../../src/sandbox/json.js';

describe('parseJsonPreservingInt64', () => {
  it('returns integers beyond 2^53 as exact bigints', () => {
    expect(parseJsonPreservingInt64('{"offset": 9007199254740993}')).toEqual({ offset: 9007199254740993n });
    expect(parseJsonPreservingInt64('[-9223372036854775808, 9223372036854775807]')).toEqual([
      -9223372036854775808n,
      9223372036854775807n,
    ]);
  });

  it('keeps safe integers, decimals and exponents as numbers on the precise path', () => {
    const parsed = parseJsonPreservingInt64(
      '{"big": 12345678901234567, "small": 42, "decimal": 1.5, "exp": 1e3, "long decimal": 1234567890123456.5}',
    );
    expect(parsed).toEqual({
      big: 12345678901234567n,
      small: 42,
      decimal: 1.5,
      exp: 1000,
      'long decimal': 1234567890123456.5,
    });
  });

  it('parses what JSON.parse parses, including escapes and nesting', () => {
    const text = '{"a":[true,false,null,"x\\"y\\u00e9\\\\",{"b":{}}],"c":"1234567890123456789 in a string","n":-0.25}';
    expect(parseJsonPreservingInt64(text)).toEqual(JSON.parse(text));
  });

  it('keeps "__proto__" as a plain data key', () => {
    const parsed = parseJsonPreservingInt64('{"__proto__": {"polluted": true}, "id": 12345678901234567890}') as Record<
      string,
      unknown
    >;
    expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
    expect(Object.keys(parsed)).toEqual(['__proto__', 'id']);
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
  });

  it.each([
    '{"a": 1',
    '{"a" 1}',
    '[1,]',
    '{"a": 12345678901234567890',
    'tru',
    '"unterminated',
    '{"offset": 0012345678901234567}',
    '',
  ])('rejects malformed JSON %j', (text) => {
    expect(() => parseJsonPreservingInt64(text)).toThrow(JsonSyntaxError);
  });
});
