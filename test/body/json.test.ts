import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseJsonObject, type JsonReading } from '../../src/body/json.js';
import { GatewayError } from '../../src/errors.js';
import { REQUEST_RULES } from '../../src/policy/rules/index.js';

function refusal(run: () => unknown): GatewayError {
  try {
    run();
  } catch (error) {
    if (error instanceof GatewayError) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

const reading = (exactNumbers: readonly string[] = [], maxDepth = 64): JsonReading => ({ maxDepth, exactNumbers });

describe('parseJsonObject: the exact text of the declared numbers', () => {
  it('keeps the digits of the numbers at the declared key paths, as sent, and of no other', () => {
    const text =
      '{"offset" : 9223372036854775808, "a": {"b": {"c": 1.50e3}}, "x": 12345678901234567890, "list": [{"offset": 7}]}';
    const body = parseJsonObject(text, reading(['offset', 'a.b.c', 'a.b.missing']));
    expect(body.numberText('offset')).toBe('9223372036854775808');
    expect(body.numberText('a.b.c')).toBe('1.50e3');
    expect(body.numberText('a.b.missing')).toBeUndefined();
    expect(body.numberText('x')).toBeUndefined(); // not declared: nothing kept
    expect(body.value.x).toBe(Number('12345678901234567890')); // the nearest double: digits lost
  });

  it('keeps nothing for a declared path that holds no number', () => {
    for (const value of ['"5"', 'null', 'true', '[5]', '{"5": 5}']) {
      expect(parseJsonObject(`{"offset": ${value}}`, reading(['offset'])).numberText('offset'), value).toBeUndefined();
    }
  });

  it('reads a key as JSON.parse does: escapes, repeated keys (the last one holds), and a dot inside a key', () => {
    expect(parseJsonObject('{"off\\u0073et": 1.5}', reading(['offset'])).numberText('offset')).toBe('1.5');
    expect(parseJsonObject('{"offset": 1.5, "offset": 2}', reading(['offset'])).numberText('offset')).toBe('2');
    expect(parseJsonObject('{"offset": 1.5, "offset": "2"}', reading(['offset'])).numberText('offset')).toBeUndefined();
    // A later object under the same key replaces the earlier one whole: its numbers are gone too.
    const reopened = parseJsonObject('{"a": {"b": 9223372036854775808}, "a": {"c": 1}}', reading(['a.b']));
    expect((reopened.value.a as Record<string, unknown>).b).toBeUndefined();
    expect(reopened.numberText('a.b')).toBeUndefined();
    // The key "a.b" is not the path a -> b.
    const dotted = parseJsonObject('{"a": {"b": 9223372036854775808}, "a.b": 1}', reading(['a.b']));
    expect(dotted.numberText('a.b')).toBe('9223372036854775808');
  });

  it('is not misled by quotes, brackets, colons or digits inside strings', () => {
    const text = '{"s": "\\"offset\\": 1, {[", "t": "\\\\", "offset": -0.5e-3, "u": "offset"}';
    expect(parseJsonObject(text, reading(['offset'])).numberText('offset')).toBe('-0.5e-3');
  });

  it("property: a declared number's text is the literal JSON.parse read, whatever surrounds it", () => {
    const digits = fc.stringMatching(/^(?:0|[1-9]\d{0,30})$/);
    const literal = fc.oneof(
      fc.tuple(fc.boolean(), digits).map(([minus, text]) => `${minus ? '-' : ''}${text}`),
      fc.tuple(digits, digits).map(([whole, fraction]) => `${whole}.${fraction}`),
      fc
        .tuple(digits, fc.constantFrom('e', 'E', 'e+', 'e-'), fc.nat(40))
        .map(([whole, e, exponent]) => `${whole}${e}${exponent}`),
    );
    // Keys and strings full of what a quick pass could take for structure.
    const tricky = fc.string({
      unit: fc.constantFrom('"', '\\', '[', '{', '}', ']', ':', ',', '1', '.', 'o', ' '),
      maxLength: 8,
    });
    const noise = fc.jsonValue({ maxDepth: 3 }).map((value) => JSON.stringify(value));
    const entries = fc.array(fc.tuple(tricky, noise), { maxLength: 4 });
    fc.assert(
      fc.property(
        entries,
        literal,
        entries,
        entries,
        fc.constantFrom('', ' ', '\n\t'),
        (before, number, inside, after, space) => {
          const members = (list: Array<[string, string]>) =>
            list.map(([key, value]) => `${JSON.stringify(`${key}~`)}:${value},`).join('');
          const text = `{${members(before)}"a":{${members(inside)}"n"${space}:${space}${number}},${members(after)}"z":0}`;
          const body = parseJsonObject(text, reading(['a.n']));
          expect(body.value).toEqual(JSON.parse(text));
          expect(body.numberText('a.n')).toBe(number);
        },
      ),
      { numRuns: 2000 },
    );
  });
});

describe('parseJsonObject: what it refuses', () => {
  it("refuses what is not a JSON object as the participant's decoder does, with JSON.parse's account of where", () => {
    expect(refusal(() => parseJsonObject('', reading())).details.cause).toBe(
      'Malformed JSON: the body is empty; this route needs a JSON object',
    );
    expect(refusal(() => parseJsonObject('[1]', reading())).details.cause).toBe(
      "Got value with wrong type, expecting object at ''",
    );
    expect(refusal(() => parseJsonObject('null', reading())).definition.code).toBe('DECODE_FAILURE');
    const error = refusal(() => parseJsonObject('{\n  "a": 1,\n}', reading()));
    expect(error.definition.code).toBe('DECODE_FAILURE');
    expect(error.details.cause).toMatch(/^Malformed JSON: .*position 12 \(line 3 column 1\)$/);
    expect(refusal(() => parseJsonObject('\uFEFF{}', reading())).definition.code).toBe('DECODE_FAILURE');
  });

  it('bounds the nesting before anything is built', () => {
    expect(parseJsonObject('{"a":[[[[[]]]]]}', reading([], 8)).value).toEqual({ a: [[[[[]]]]] });
    const tooDeep = refusal(() =>
      parseJsonObject(`{"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}`, reading([], 512)),
    );
    expect(tooDeep.definition.code).toBe('GATEWAY_MALFORMED_REQUEST'); // the gateway's own limit, not the decoder's
    expect(tooDeep.details.cause).toBe('The body is nested deeper than 512 levels (at position 516).'); // the 513th bracket
  });

  it('property: counts only real nesting, never brackets inside strings', () => {
    const trickyString = fc
      .string({ unit: fc.constantFrom('"', '\\', '[', '{', ']', '}', 'x'), maxLength: 10 })
      .map((text) => JSON.stringify(text));
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 14 }),
        fc.integer({ min: 8, max: 12 }),
        fc.array(trickyString, { maxLength: 4 }),
        (depth, maxDepth, strings) => {
          // depth levels in all: the outer object, then arrays, with the strings at the innermost level
          const text = `{"a":${'['.repeat(depth - 1)}${strings.join(',')}${']'.repeat(depth - 1)}}`;
          if (depth <= maxDepth) expect(parseJsonObject(text, reading([], maxDepth)).value).toEqual(JSON.parse(text));
          else
            expect(refusal(() => parseJsonObject(text, reading([], maxDepth))).details.cause).toContain(
              `nested deeper than ${maxDepth} levels`,
            );
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('reads a body nested as deep as allowed, non-integer numbers included (nothing recurses)', () => {
    const text = `{"a":${'['.repeat(9_000)}1.5${']'.repeat(9_000)}}`;
    let innermost = parseJsonObject(text, reading(['a'], 10_000)).value.a;
    for (let level = 0; level < 9_000; level++) innermost = (innermost as unknown[])[0];
    expect(innermost).toBe(1.5);
  });

  it('keeps __proto__ and constructor as plain keys: nothing is polluted', () => {
    const { value } = parseJsonObject(
      '{"__proto__": {"polluted": true}, "constructor": {"prototype": {"polluted": true}}}',
      reading(),
    );
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(Object.hasOwn(value, '__proto__')).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('property: parses every JSON object exactly as JSON.parse does', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), (value) => {
        const text = JSON.stringify(value);
        expect(parseJsonObject(text, reading(['a.b', 'c'], 10_000)).value).toEqual(JSON.parse(text));
      }),
    );
  });

  it('property: no rule throws, whatever JSON object it is given', () => {
    const keys = fc.constantFrom(
      'changes',
      'operation',
      'Vet',
      'value',
      'packages',
      'offset',
      'updateFormat',
      'includeTransactions',
      'eventFormat',
      'commands',
      'commandId',
      'actAs',
      'userId',
      'CreateCommand',
      'templateId',
      'identityProviderConfig',
      'updateMask',
      'paths',
      'serial',
      'Prior',
      'expectedTopologySerial',
      'transactionFormat',
      'deduplicationPeriod',
      'DeduplicationOffset',
      'tapsMaxPasses',
      '__proto__',
      'constructor',
    );
    const tree = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: 'small' },
        fc.jsonValue({ maxDepth: 1 }),
        fc.array(tie('node'), { maxLength: 3 }),
        fc.dictionary(keys, tie('node'), { maxKeys: 4 }),
      ),
    })).node;
    fc.assert(
      fc.property(fc.dictionary(keys, tree, { maxKeys: 5 }), (body) => {
        for (const rule of REQUEST_RULES.values()) {
          const parsed = parseJsonObject(JSON.stringify(body), reading(rule.exactNumbers, 512));
          rule(parsed.value, { path: '/v2/idps/x', principal: null, numberText: parsed.numberText });
        }
      }),
      { numRuns: 1000 },
    );
  });
});
