import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { GatewayError } from '../../src/errors.js';
import { bodyText, checkJsonSyntax, parseJsonBody, readRequestBody } from '../../src/policy/json-body.js';
import { INT64_MAX, readInteger } from '../../src/policy/numbers.js';
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

describe('parseJsonBody', () => {
  it('keeps every number\'s exact digits next to the value', () => {
    const parsed = parseJsonBody('{"offset": 9223372036854775807, "list": [1.50e3, -0], "n": {"x": 12345678901234567890}}', 64);
    const value = parsed.value as { list: unknown[]; n: object };
    expect(parsed.numberText(value as object, 'offset')).toBe('9223372036854775807');
    expect(parsed.numberText(value.list, '0')).toBe('1.50e3');
    expect(parsed.numberText(value.list, '1')).toBe('-0');
    expect(parsed.numberText(value.n, 'x')).toBe('12345678901234567890');
  });

  it('gives a number\'s text on the fast path too (no reviver when every number is a plain integer)', () => {
    const parsed = parseJsonBody('{"offset": 42, "list": [0, -7, 999999999999999], "s": "1.5", "__proto__": 3}', 64);
    const value = parsed.value as { list: unknown[] };
    expect(parsed.numberText(value, 'offset')).toBe('42');
    expect(parsed.numberText(value.list, '2')).toBe('999999999999999');
    expect(parsed.numberText(value.list, '1')).toBe('-7');
    expect(parsed.numberText(value, '__proto__')).toBe('3');
    // Not numbers, or not there: no text, as on the reviver path.
    expect(parsed.numberText(value, 's')).toBeUndefined();
    expect(parsed.numberText(value, 'missing')).toBeUndefined();
    expect(parsed.numberText(value.list, 'length')).toBeUndefined();
    expect(parsed.numberText(value, 'constructor')).toBeUndefined();
  });

  it('property: every number\'s text is exactly as sent, whichever path the body takes', () => {
    const plain = fc.bigInt({ min: -(10n ** 15n) + 1n, max: 10n ** 15n - 1n }).map(String);
    const digits = fc.stringMatching(/^(?:0|[1-9]\d{0,30})$/);
    const literal = fc.oneof(
      plain,
      plain, // most bodies hold only plain integers
      fc.tuple(fc.boolean(), digits).map(([minus, text]) => `${minus ? '-' : ''}${text}`), // up to 31 digits, and -0
      fc.tuple(digits, digits).map(([whole, fraction]) => `${whole}.${fraction}`),
      fc.tuple(digits, fc.constantFrom('e', 'E', 'e+', 'e-'), fc.nat(40)).map(([whole, e, exponent]) => `${whole}${e}${exponent}`),
    );
    // Keys full of what a quick pass could mistake for structure: quotes, backslashes, brackets, digits.
    const trickyKey = fc.string({ unit: fc.constantFrom('"', '\\', '[', '{', '}', ']', '1', '.', 'e', '-', 'a', ' ', ':', ','), maxLength: 8 });
    fc.assert(fc.property(fc.array(fc.tuple(trickyKey, literal), { minLength: 1, maxLength: 6 }), (entries) => {
      const keyed = entries.map(([key, l], i) => [`${key}#${i}`, l] as const); // distinct keys
      const text = `{${keyed.map(([key, l]) => `${JSON.stringify(key)}: ${l}`).join(', ')}, "list": [${keyed.map(([, l]) => l).join(',')}]}`;
      const parsed = parseJsonBody(text, 64);
      const value = parsed.value as Record<string, unknown> & { list: unknown[] };
      keyed.forEach(([key, l], i) => {
        expect(parsed.numberText(value, key)).toBe(l);
        expect(parsed.numberText(value.list, String(i))).toBe(l);
      });
    }), { numRuns: 2000 });
  });

  it('keeps __proto__ and constructor as plain keys: nothing is polluted', () => {
    const parsed = parseJsonBody('{"__proto__": {"polluted": true}, "constructor": {"prototype": {"polluted": true}}}', 64);
    const value = parsed.value as Record<string, unknown>;
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(Object.hasOwn(value, '__proto__')).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('takes the last of repeated keys, as circe does', () => {
    expect(parseJsonBody('{"offset": 1, "offset": 2}', 64).value).toEqual({ offset: 2 });
  });

  it('refuses what is not a JSON object, naming the problem, the position and the field path', () => {
    // The participant's JSON decoder refuses all of these: its 400 text/plain decode failure.
    expect(refusal(() => parseJsonBody('', 64)).details.cause).toBe('Malformed JSON: the body is empty; this route needs a JSON object');
    expect(refusal(() => parseJsonBody('[1]', 64)).details.cause).toBe("Got value with wrong type, expecting object at ''");
    expect(refusal(() => parseJsonBody('null', 64)).definition.code).toBe('DECODE_FAILURE');
    const error = refusal(() => parseJsonBody('{"changes": [{"operation": {"Vet": tru}}]}', 64));
    expect(error.definition.code).toBe('DECODE_FAILURE');
    expect(error.details.cause).toBe('Malformed JSON: Unexpected character \'t\', a value was expected at line 1 column 36 (position 35), in changes[0].operation.Vet');
    expect(refusal(() => parseJsonBody('{\n  "a": 1,\n}', 64)).details.cause).toContain('at line 3 column 1');
    expect(refusal(() => parseJsonBody('\uFEFF{}', 64)).details.cause).toContain('Unexpected character U+FEFF');
  });

  it('bounds the nesting depth without recursion', () => {
    expect(parseJsonBody('{"a":[[[[[]]]]]}', 8).value).toEqual({ a: [[[[[]]]]] });
    const deep = `{"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}`;
    const tooDeep = refusal(() => parseJsonBody(deep, 512));
    expect(tooDeep.details.cause).toContain('nested deeper than 512 levels');
    expect(tooDeep.definition.code).toBe('GATEWAY_MALFORMED_REQUEST'); // the gateway's own limit, not the decoder's
  });

  it('property: counts only real nesting, never brackets inside strings', () => {
    const trickyString = fc.string({ unit: fc.constantFrom('"', '\\', '[', '{', ']', '}', 'x'), maxLength: 10 }).map((text) => JSON.stringify(text));
    fc.assert(fc.property(fc.integer({ min: 2, max: 14 }), fc.integer({ min: 8, max: 12 }), fc.array(trickyString, { maxLength: 4 }), (depth, maxDepth, strings) => {
      // depth levels in all: the outer object, then arrays, with the strings at the innermost level
      const text = `{"a":${'['.repeat(depth - 1)}${strings.join(',')}${']'.repeat(depth - 1)}}`;
      if (depth <= maxDepth) expect(parseJsonBody(text, maxDepth).value).toEqual(JSON.parse(text));
      else expect(refusal(() => parseJsonBody(text, maxDepth)).details.cause).toContain(`nested deeper than ${maxDepth} levels`);
    }), { numRuns: 1000 });
  });

  it('refuses with a coded 400, never a crash, a body too deep to revive its numbers within the allowed depth', () => {
    // JSON.parse reads it; V8's reviver (needed for the 1.5) recurses and runs out of stack.
    const text = `{"a":${'['.repeat(9_000)}1.5${']'.repeat(9_000)}}`;
    expect(refusal(() => parseJsonBody(text, 10_000)).details.cause).toContain('nested too deeply to read its numbers exactly');
    // The same nesting with plain integers needs no reviver, and is read.
    let innermost = (parseJsonBody(text.replace('1.5', '15'), 10_000).value as { a: unknown }).a;
    for (let level = 0; level < 9_000; level++) innermost = (innermost as unknown[])[0];
    expect(innermost).toBe(15);
  });

  it('handles a long string without exhausting anything', () => {
    const text = `{"s": "${'x'.repeat(5_000_000)}"}`;
    expect((parseJsonBody(text, 8).value as { s: string }).s.length).toBe(5_000_000);
  });

  it('property: the syntax check agrees with JSON.parse on any text', () => {
    const jsonish = fc.oneof(
      fc.json(),
      fc.json().map((text) => text.slice(0, Math.max(0, text.length - 1))),
      fc.tuple(fc.json(), fc.nat(), fc.constantFrom(',', '}', ']', '"', ':', ' ', '\\', '\u0001', 'x', '0', '-', '.', 'e')).map(([text, at, c]) => {
        const i = at % (text.length + 1);
        return text.slice(0, i) + c + text.slice(i);
      }),
      fc.string(),
    );
    fc.assert(fc.property(jsonish, (text) => {
      let parses = true;
      try {
        JSON.parse(text);
      } catch {
        parses = false;
      }
      expect(checkJsonSyntax(text, 10_000) === undefined).toBe(parses);
    }), { numRuns: 3000 });
  });

  it('property: parses every JSON object exactly as JSON.parse does', () => {
    fc.assert(fc.property(fc.dictionary(fc.string(), fc.jsonValue()), (value) => {
      expect(parseJsonBody(JSON.stringify(value), 10_000).value).toEqual(JSON.parse(JSON.stringify(value)));
    }));
  });

  it('property: no rule throws, whatever JSON object it is given', () => {
    const keys = fc.constantFrom('changes', 'operation', 'Vet', 'value', 'packages', 'offset', 'updateFormat', 'includeTransactions', 'eventFormat',
      'commands', 'commandId', 'actAs', 'userId', 'CreateCommand', 'templateId', 'identityProviderConfig', 'updateMask', 'paths', 'serial', 'Prior',
      'expectedTopologySerial', 'transactionFormat', 'deduplicationPeriod', '__proto__', 'constructor');
    const tree = fc.letrec((tie) => ({
      node: fc.oneof({ depthSize: 'small' }, fc.jsonValue({ maxDepth: 1 }), fc.array(tie('node'), { maxLength: 3 }), fc.dictionary(keys, tie('node'), { maxKeys: 4 })),
    })).node;
    fc.assert(fc.property(fc.dictionary(keys, tree, { maxKeys: 5 }), (body) => {
      const parsed = parseJsonBody(JSON.stringify(body), 512);
      for (const rule of REQUEST_RULES.values()) {
        rule(parsed.value, { path: '/v2/idps/x', principal: null, numberText: parsed.numberText });
      }
    }), { numRuns: 1000 });
  });
});

describe('bodyText', () => {
  it('reads UTF-8 whatever the media type says, as tapir\'s jsonBody does', () => {
    const bytes = Buffer.from('{"a":"é"}');
    for (const type of [undefined, 'application/json', 'text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=UTF-8', 'text/plain; charset="utf8"']) {
      expect(bodyText(bytes, type), String(type)).toBe('{"a":"é"}');
    }
  });

  it('reads the single-byte charsets the participant decodes (ISO-8859-x, windows-125x) and refuses what it cannot read as the participant would (415)', () => {
    expect(bodyText(Buffer.from('{"a":1}'), 'application/json; charset=ISO-8859-1')).toBe('{"a":1}');
    expect(bodyText(Buffer.from('{"a":"é"}', 'latin1'), 'application/json; charset=ISO-8859-1')).toBe('{"a":"é"}');
    expect(bodyText(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0x80, 0x9f, 0x22, 0x7d]), 'text/plain; charset=ISO-8859-1')).toBe('{"a":"\u0080\u009f"}'); // Java's ISO-8859-1: C1 controls, not windows-1252
    expect(bodyText(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0x80, 0x22, 0x7d]), 'application/json; charset=windows-1252')).toBe('{"a":"€"}');
    expect(bodyText(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xb1, 0x22, 0x7d]), 'application/json; charset="iso-8859-2"')).toBe('{"a":"ą"}');
    expect(bodyText(Buffer.from('{"a":1}'), 'application/json; charset=us-ascii')).toBe('{"a":1}');
    // As Java reads them: a byte US-ASCII or a windows code page does not define is U+FFFD.
    expect(bodyText(Buffer.from('{"a":"é"}', 'latin1'), 'application/json; charset=us-ascii')).toBe('{"a":"\ufffd"}');
    expect(bodyText(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0x81, 0x22, 0x7d]), 'application/json; charset=cp1252')).toBe('{"a":"\ufffd"}');
    for (const [bytes, type] of [
      [Buffer.from('{}', 'utf16le'), 'application/json; charset=utf-16'],
      [Buffer.from('{"a":"é"}', 'latin1'), 'application/json; charset=x-unknown'],
      // Read otherwise by TextDecoder than by Java (WHATWG reads ISO-8859-9 as windows-1254), or unknown to Java.
      [Buffer.from('{"a":"é"}', 'latin1'), 'application/json; charset=iso-8859-9'],
      [Buffer.from('{"a":"é"}', 'latin1'), 'application/json; charset=windows-1255'],
      [Buffer.from('{"a":"é"}', 'latin1'), 'application/json; charset=iso-8859-14'],
    ] as const) {
      expect(refusal(() => bodyText(bytes, type)).definition, type).toMatchObject({ code: 'GATEWAY_UNSUPPORTED_MEDIA_TYPE', status: 415 });
    }
  });
});

describe('readInteger (circe\'s Long and Int)', () => {
  it('reads whole numbers in any notation and numeric strings, exactly', () => {
    const cases: Array<[unknown, string | undefined, bigint | undefined]> = [
      [1, '9223372036854775807', INT64_MAX],
      [1, '9223372036854775808', undefined],
      [1, '-9223372036854775808', -(2n ** 63n)],
      [1, '1e18', 10n ** 18n],
      [1, '1e19', undefined],
      [1, '10.0', 10n],
      [1, '0.5e1', 5n],
      [1, '1.5', undefined],
      [0, '0e99999999999', 0n],
      [1, '1e-99999999999', undefined],
      ['42', undefined, 42n],
      ['+42', undefined, 42n],
      ['0042', undefined, 42n],
      ['4.2e1', undefined, 42n],
      [' 42', undefined, undefined],
      [null, undefined, undefined],
      [true, undefined, undefined],
    ];
    for (const [value, source, expected] of cases) {
      const reading = readInteger(value, source, -(2n ** 63n), INT64_MAX);
      expect(reading.ok ? reading.value : undefined, `${JSON.stringify(value)} ${source}`).toBe(expected);
    }
  });

  it('property: agrees with BigInt on every int64 written plainly', () => {
    fc.assert(fc.property(fc.bigInt(-(2n ** 63n), INT64_MAX), (n) => {
      const reading = readInteger(Number(n), n.toString(), -(2n ** 63n), INT64_MAX);
      expect(reading).toEqual({ ok: true, value: n });
    }));
  });
});

describe('readRequestBody', () => {
  let server: http.Server | undefined;
  afterEach(async () => {
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    server = undefined;
  });

  async function serve(limits: { maxBytes: number; timeoutMs: number }) {
    const outcomes: Array<Buffer | GatewayError> = [];
    server = http.createServer((request, response) => {
      readRequestBody(request, limits).then((body) => {
        outcomes.push(body);
        response.end('ok');
      }, (error: GatewayError) => {
        outcomes.push(error);
        response.writeHead(error.definition.status, error.headers).end('refused');
      });
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, outcomes };
  }

  it('reads a declared and a chunked body whole', async () => {
    const { url, outcomes } = await serve({ maxBytes: 100, timeoutMs: 5_000 });
    await fetch(url, { method: 'POST', body: '{"a":1}' });
    await fetch(url, { method: 'POST', body: new Blob(['{"b":', '2}']).stream(), duplex: 'half' } as RequestInit);
    expect(outcomes.map(String)).toEqual(['{"a":1}', '{"b":2}']);
  });

  it('refuses a declared length over the limit at once, and a chunked body once it passes the limit', async () => {
    const { url, outcomes } = await serve({ maxBytes: 10, timeoutMs: 5_000 });
    const declared = await fetch(url, { method: 'POST', body: 'x'.repeat(11) });
    expect(declared.status).toBe(413);
    expect(declared.headers.get('connection')).toBe('close');
    const chunked = await fetch(url, { method: 'POST', body: new Blob(['x'.repeat(8), 'x'.repeat(8)]).stream(), duplex: 'half' } as RequestInit);
    expect(chunked.status).toBe(413);
    expect(outcomes).toHaveLength(2);
    expect(outcomes.every((outcome) => outcome instanceof GatewayError && outcome.definition.code === 'GATEWAY_REQUEST_TOO_LARGE')).toBe(true);
  });

  it('bounds the time a body may take', async () => {
    const { url, outcomes } = await serve({ maxBytes: 100, timeoutMs: 200 });
    const { port, hostname } = new URL(url);
    const started = Date.now();
    const answer = await new Promise<string>((resolve, reject) => {
      const request = http.request({ host: hostname, port, method: 'POST', headers: { 'content-length': '50' } }, (response) => {
        resolve(String(response.statusCode));
        response.resume();
      });
      request.on('error', reject);
      request.write('{"a":'); // and never the rest
    });
    expect(answer).toBe('400');
    expect(Date.now() - started).toBeLessThan(3_000);
    expect((outcomes[0] as GatewayError).details.cause).toContain('not received within 200 ms');
  });
});
