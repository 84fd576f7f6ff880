import { describe, expect, it } from 'vitest';
import { decodeBody } from '../../src/body/charset.js';
import { GatewayError } from '../../src/errors.js';

function refusal(run: () => unknown): GatewayError {
  try {
    run();
  } catch (error) {
    if (error instanceof GatewayError) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

describe('decodeBody', () => {
  it('reads UTF-8 when no charset is declared, or UTF-8 is', () => {
    const bytes = Buffer.from('{"a":"é"}');
    for (const charset of [undefined, 'UTF-8', 'utf8'])
      expect(decodeBody(bytes, charset), String(charset)).toBe('{"a":"é"}');
    // Malformed sequences are replaced, as Java's decoder replaces them.
    expect(decodeBody(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0x22, 0x7d]), undefined)).toBe(
      '{"a":"\ufffd("}',
    );
  });

  it('reads the single-byte charsets the participant decodes (ISO-8859-x, windows-125x) and refuses what it cannot read as the participant would (415)', () => {
    expect(decodeBody(Buffer.from('{"a":1}'), 'ISO-8859-1')).toBe('{"a":1}');
    expect(decodeBody(Buffer.from('{"a":"é"}', 'latin1'), 'ISO-8859-1')).toBe('{"a":"é"}');
    expect(decodeBody(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0x80, 0x9f, 0x22, 0x7d]), 'ISO-8859-1')).toBe(
      '{"a":"\u0080\u009f"}',
    ); // Java's ISO-8859-1: C1 controls, not windows-1252
    expect(decodeBody(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0x80, 0x22, 0x7d]), 'windows-1252')).toBe(
      '{"a":"€"}',
    );
    expect(decodeBody(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xb1, 0x22, 0x7d]), 'iso-8859-2')).toBe(
      '{"a":"ą"}',
    );
    expect(decodeBody(Buffer.from('{"a":1}'), 'us-ascii')).toBe('{"a":1}');
    // As Java reads them: a byte US-ASCII or a windows code page does not define is U+FFFD.
    expect(decodeBody(Buffer.from('{"a":"é"}', 'latin1'), 'us-ascii')).toBe('{"a":"\ufffd"}');
    expect(decodeBody(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0x81, 0x22, 0x7d]), 'cp1252')).toBe(
      '{"a":"\ufffd"}',
    );
    // Any ASCII-compatible charset reads an all-ASCII body alike.
    expect(decodeBody(Buffer.from('{"a":1}'), 'iso-8859-9')).toBe('{"a":1}');
    for (const [bytes, charset] of [
      [Buffer.from('{}', 'utf16le'), 'utf-16'],
      [Buffer.from('{"a":"é"}', 'latin1'), 'x-unknown'],
      // Read otherwise by TextDecoder than by Java (WHATWG reads ISO-8859-9 as windows-1254), or unknown to Java.
      [Buffer.from('{"a":"é"}', 'latin1'), 'iso-8859-9'],
      [Buffer.from('{"a":"é"}', 'latin1'), 'windows-1255'],
      [Buffer.from('{"a":"é"}', 'latin1'), 'iso-8859-14'],
    ] as const) {
      expect(refusal(() => decodeBody(bytes, charset)).definition, charset).toMatchObject({
        code: 'GATEWAY_UNSUPPORTED_MEDIA_TYPE',
        status: 415,
      });
    }
  });
});
