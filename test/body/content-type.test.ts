import { createRequire } from 'node:module';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { contentTypesConflict, declaredContentType, parseContentType } from '../../src/body/content-type.js';

/** Fastify's own reading of a Content-Type value, which answers 415 to one it finds invalid. */
const FastifyContentType = createRequire(import.meta.url)('fastify/lib/content-type.js') as new (value: string) => {
  readonly isValid: boolean;
};

const lines = (...values: string[]) => values.flatMap((value) => ['Content-Type', value]);

describe('parseContentType', () => {
  it('reads the media type and its parameters (RFC 9110 §8.3.1), quoted values unquoted', () => {
    expect(parseContentType('Application/JSON; Charset="ISO-8859-1"')).toEqual({
      mediaType: 'application/json',
      parameters: { charset: 'ISO-8859-1' },
    });
    // A quoted parameter that holds "charset=" is no charset.
    expect(parseContentType('application/json; note="a; charset=utf-16"')?.parameters).toEqual({
      note: 'a; charset=utf-16',
    });
  });

  it('declares nothing with a value that does not parse, as pekko-http keeps such a line raw', () => {
    for (const value of [
      '',
      ' ',
      'json',
      'application/',
      'application/json; charset',
      'application/json; charset="utf-16',
      'a b/c',
    ]) {
      expect(parseContentType(value), JSON.stringify(value)).toBeUndefined();
    }
  });
});

describe('what Fastify is shown', () => {
  it('property: a value that parses here parses for Fastify too (app.ts hides from Fastify only the values that do not)', () => {
    const unit = fc.constantFrom(...'aJx1-+.*/;= "\t\\,\'()é'.split(''));
    const value = fc.oneof(
      fc.string({ unit, maxLength: 40 }),
      fc
        .tuple(fc.constantFrom('application/json', 'text/plain', 'a/b'), fc.string({ unit, maxLength: 30 }))
        .map(([type, rest]) => type + rest),
    );
    fc.assert(
      fc.property(value, (text) => {
        if (parseContentType(text) !== undefined)
          expect(new FastifyContentType(text).isValid, JSON.stringify(text)).toBe(true);
      }),
      { numRuns: 5000 },
    );
  });
});

describe('declaredContentType and contentTypesConflict', () => {
  it('takes the first line that parses', () => {
    expect(
      declaredContentType(['Host', 'x', ...lines('application/json; charset=iso-8859-2')])?.parameters.charset,
    ).toBe('iso-8859-2');
    expect(declaredContentType(lines('nonsense', 'text/plain; charset=windows-1252'))?.parameters.charset).toBe(
      'windows-1252',
    );
    expect(declaredContentType(['Host', 'x'])).toBeUndefined();
    expect(declaredContentType(['content-type', ''])).toBeUndefined();
  });

  it('finds a conflict only between lines that parse to different types', () => {
    expect(contentTypesConflict(lines('application/json'))).toBe(false);
    expect(contentTypesConflict(lines('application/json', 'application/json'))).toBe(false);
    expect(contentTypesConflict(lines('application/json; charset=utf-8', 'Application/Json;charset=UTF-8'))).toBe(
      false,
    );
    expect(contentTypesConflict(lines('application/json', 'nonsense'))).toBe(false);
    expect(contentTypesConflict(lines('application/json', 'text/plain'))).toBe(true);
    expect(contentTypesConflict(lines('application/json', 'application/json; charset=iso-8859-1'))).toBe(true);
    expect(
      contentTypesConflict([
        'content-type',
        'application/json',
        'Host',
        'x',
        'CONTENT-TYPE',
        'application/json; charset=utf-16',
      ]),
    ).toBe(true);
  });
});
