// JSON parsing that keeps int64 precision: Canton offsets are int64 (its OpenAPI), and a JS number
// silently rounds integers beyond 2^53. Integers that are not safe integers come back as bigint.

export type Json = null | boolean | number | bigint | string | Json[] | JsonObject;
export interface JsonObject {
  [key: string]: Json;
}

export class JsonSyntaxError extends Error {
  override name = 'JsonSyntaxError';
}

// Sixteen digits in a row is the shortest run that can exceed Number.MAX_SAFE_INTEGER.
const MAYBE_UNSAFE_INTEGER = /\d{16}/;
const NUMBER_TOKEN = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
const MAX_DEPTH = 512;

/** Parse JSON text; integers outside the safe range are returned as bigint. */
export function parseJsonPreservingInt64(text: string): Json {
  if (!MAYBE_UNSAFE_INTEGER.test(text)) {
    try {
      return JSON.parse(text) as Json;
    } catch (error) {
      throw new JsonSyntaxError((error as Error).message);
    }
  }
  const parser = new PreciseParser(text);
  const value = parser.parseDocument();
  return value;
}

class PreciseParser {
  private position = 0;
  constructor(private readonly text: string) {}

  parseDocument(): Json {
    const value = this.parseValue(0);
    this.skipWhitespace();
    if (this.position !== this.text.length) this.fail('unexpected trailing characters');
    return value;
  }

  private parseValue(depth: number): Json {
    if (depth > MAX_DEPTH) this.fail('nesting too deep');
    this.skipWhitespace();
    const char = this.text[this.position];
    switch (char) {
      case '{':
        return this.parseObject(depth);
      case '[':
        return this.parseArray(depth);
      case '"':
        return this.parseString();
      case 't':
        return this.parseLiteral('true', true);
      case 'f':
        return this.parseLiteral('false', false);
      case 'n':
        return this.parseLiteral('null', null);
      default:
        return this.parseNumber();
    }
  }

  private parseObject(depth: number): JsonObject {
    const result: JsonObject = {};
    this.position++;
    this.skipWhitespace();
    if (this.text[this.position] === '}') {
      this.position++;
      return result;
    }
    for (;;) {
      this.skipWhitespace();
      if (this.text[this.position] !== '"') this.fail('expected a string key');
      const key = this.parseString();
      this.skipWhitespace();
      if (this.text[this.position] !== ':') this.fail("expected ':'");
      this.position++;
      const value = this.parseValue(depth + 1);
      // defineProperty so that a "__proto__" key stays data, as with JSON.parse.
      Object.defineProperty(result, key, { value, enumerable: true, writable: true, configurable: true });
      this.skipWhitespace();
      const next = this.text[this.position++];
      if (next === '}') return result;
      if (next !== ',') this.fail("expected ',' or '}'");
    }
  }

  private parseArray(depth: number): Json[] {
    const result: Json[] = [];
    this.position++;
    this.skipWhitespace();
    if (this.text[this.position] === ']') {
      this.position++;
      return result;
    }
    for (;;) {
      result.push(this.parseValue(depth + 1));
      this.skipWhitespace();
      const next = this.text[this.position++];
      if (next === ']') return result;
      if (next !== ',') this.fail("expected ',' or ']'");
    }
  }

  private parseString(): string {
    const start = this.position;
    let index = start + 1;
    for (;;) {
      const char = this.text.charCodeAt(index);
      if (Number.isNaN(char)) this.fail('unterminated string');
      if (char === 0x5c) {
        index += 2;
        continue;
      }
      if (char === 0x22) break;
      index++;
    }
    this.position = index + 1;
    try {
      return JSON.parse(this.text.slice(start, index + 1)) as string;
    } catch {
      return this.fail('invalid string');
    }
  }

  private parseNumber(): number | bigint {
    NUMBER_TOKEN.lastIndex = this.position;
    const match = NUMBER_TOKEN.exec(this.text);
    if (match === null) return this.fail('unexpected character');
    const token = match[0];
    this.position += token.length;
    const isInteger = match[1] === undefined && match[2] === undefined;
    const asNumber = Number(token);
    if (isInteger && !Number.isSafeInteger(asNumber)) return BigInt(token);
    return asNumber;
  }

  private parseLiteral<T extends Json>(word: string, value: T): T {
    if (!this.text.startsWith(word, this.position)) this.fail('unexpected token');
    this.position += word.length;
    return value;
  }

  private skipWhitespace(): void {
    for (;;) {
      const char = this.text.charCodeAt(this.position);
      if (char !== 0x20 && char !== 0x0a && char !== 0x0d && char !== 0x09) return;
      this.position++;
    }
  }

  private fail(reason: string): never {
    throw new JsonSyntaxError(`${reason} at position ${this.position}`);
  }
}

export function isJsonObject(value: Json | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
