// Reading and parsing the body of a rule-checked route: bounded in size, time and nesting, the
// bytes kept for the forwarder (never a re-serialization), numbers kept with their exact digits.
//
// How the participant reads the same bytes (Canton `V2Routes.scala`): tapir's plain `jsonBody` input
// accepts any Content-Type, or none (tapir `DecodeBasicInputs.addBodyInput` wraps it as
// `oneOfBody(ContentTypeRange.AnyRange -> body)`), pekko decodes the bytes with the declared charset
// (UTF-8 when none), and circe/jawn parses strict RFC 8259 JSON in which a repeated key keeps its
// last value (`CirceSupportParser`: LinkedHashMap.put). JSON.parse does the same, so the rules judge
// exactly the value the participant would decode. A media type is therefore never refused; only a
// charset the gateway cannot read as the participant would is (415).
import { TextDecoder } from 'node:util';
import type { IncomingMessage } from 'node:http';
import { closingConnection, Errors, GatewayError } from '../errors.js';
import { tooLarge } from '../proxy/forward.js';

export interface BodyLimits {
  /** limits.bodyBytes */
  readonly maxBytes: number;
  /** policy.bodyReadTimeoutMs */
  readonly timeoutMs: number;
}

function malformed(cause: string, headers: Record<string, string> = {}): GatewayError {
  return new GatewayError(Errors.GATEWAY_MALFORMED_REQUEST, { cause }, { headers });
}


/**
 * Reads the whole request body into one Buffer. A declared Content-Length above the limit is
 * refused at once, without reading; a chunked body is counted as it arrives. The read is bounded
 * in time (a slow client cannot hold a body read open).
 */
export function readRequestBody(raw: IncomingMessage, limits: BodyLimits): Promise<Buffer> {
  const declared = raw.headers['content-length'];
  if (declared !== undefined && Number(declared) > limits.maxBytes) return Promise.reject(closingConnection(tooLarge(limits.maxBytes)));
  if (raw.readableEnded) return Promise.resolve(Buffer.alloc(0));
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (error: GatewayError | undefined) => {
      clearTimeout(timer);
      raw.off('data', onData);
      raw.off('end', onEnd);
      raw.off('error', onError);
      raw.off('close', onClose);
      if (error === undefined) {
        resolve(Buffer.concat(chunks, size));
        return;
      }
      raw.resume(); // discard the rest; the answer closes the connection
      reject(error);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limits.maxBytes) finish(closingConnection(tooLarge(limits.maxBytes)));
      else chunks.push(chunk);
    };
    const onEnd = () => finish(undefined);
    const onError = () => finish(closingConnection(malformed('The request body could not be read: the client connection failed.')));
    const onClose = () => {
      if (!raw.readableEnded) finish(closingConnection(malformed('The request body ended before it was complete.')));
    };
    const timer = setTimeout(() => {
      finish(closingConnection(malformed(`The request body was not received within ${limits.timeoutMs} ms (policy.bodyReadTimeoutMs).`)));
    }, limits.timeoutMs);
    raw.on('data', onData);
    raw.on('end', onEnd);
    raw.on('error', onError);
    raw.on('close', onClose);
  });
}

const CHARSET = /;\s*charset\s*=\s*(?:"([^"]*)"|([^;\s]+))/i;
const UTF8_LABELS = new Set(['utf-8', 'utf8']);
/** Java's ISO-8859-1 is Node's latin1, byte for byte (WHATWG's TextDecoder would read it as windows-1252). */
const LATIN1_LABELS = new Set(['iso-8859-1', 'iso8859-1', 'iso_8859-1', 'latin1', 'l1']);
/** US-ASCII as Java reads it: a byte above 0x7f is U+FFFD. */
const ASCII_LABELS = new Set(['us-ascii', 'ascii']);
const ASCII_COMPATIBLE = /^(?:us-ascii|ascii|iso-8859-\d+|iso8859-\d+|windows-125\d|cp125\d)$/;
/**
 * The other single-byte charsets, under TextDecoder's label, where it reads all 256 bytes as Java 17
 * does (checked byte for byte): the ISO-8859 parts both define alike (not 9 and 11, which WHATWG reads
 * as windows-1254 and windows-874, nor those Java does not know), and windows-1250 to 1258 but 1255, whose
 * undefined bytes TextDecoder reads as C1 controls where Java reads U+FFFD (mapped below).
 */
const SINGLE_BYTE: ReadonlyMap<string, string> = new Map([
  ...[2, 3, 4, 5, 6, 7, 8, 13, 15].flatMap((part) => [[`iso-8859-${part}`, `iso-8859-${part}`], [`iso8859-${part}`, `iso-8859-${part}`]] as const),
  ['iso-8859-16', 'iso-8859-16'],
  // Not 1255: TextDecoder reads its byte 0xCA as U+05BA, Java as undefined.
  ...[0, 1, 2, 3, 4, 6, 7, 8].flatMap((page) => [[`windows-125${page}`, `windows-125${page}`], [`cp125${page}`, `windows-125${page}`]] as const),
]);
const decoders = new Map<string, TextDecoder>();
function singleByteText(bytes: Buffer, label: string): string {
  let decoder = decoders.get(label);
  if (decoder === undefined) decoders.set(label, (decoder = new TextDecoder(label)));
  const text = decoder.decode(bytes);
  // windows-125x: no defined byte reads as a C1 control, so one that does is undefined: U+FFFD in Java.
  return label.startsWith('windows-') ? text.replace(/[\u0080-\u009f]/g, '\ufffd') : text;
}

/**
 * The body as text, read the way the participant reads it (pekko-http decodes the declared charset
 * with Java's decoders). No charset (or UTF-8): UTF-8, with malformed sequences replaced as Java's
 * decoder replaces them. ISO-8859-1 and US-ASCII exactly; the single-byte charsets above through
 * TextDecoder; any ASCII-compatible charset reads an all-ASCII body identically. Anything else
 * (UTF-16, whose byte order Java and TextDecoder guess differently, or a charset read differently or
 * unknown to either) the gateway cannot judge as the participant would: 415.
 */
export function bodyText(bytes: Buffer, contentType: string | undefined): string {
  const match = contentType === undefined ? null : CHARSET.exec(contentType);
  const charset = (match?.[1] ?? match?.[2])?.toLowerCase();
  if (charset === undefined || UTF8_LABELS.has(charset)) return bytes.toString('utf8');
  if (LATIN1_LABELS.has(charset)) return bytes.toString('latin1');
  if (ASCII_LABELS.has(charset)) return bytes.toString('latin1').replace(/[\u0080-\u00ff]/g, '\ufffd');
  const label = SINGLE_BYTE.get(charset);
  if (label !== undefined) return singleByteText(bytes, label);
  if (ASCII_COMPATIBLE.test(charset) && bytes.every((byte) => byte < 0x80)) return bytes.toString('latin1');
  throw new GatewayError(Errors.GATEWAY_UNSUPPORTED_MEDIA_TYPE, {
    cause: `The request body is declared as charset ${charset}; this route's body must be UTF-8 JSON (or plain ASCII).`,
  });
}

/** Where a JSON problem is, as a position and the field path that leads to it. */
export interface JsonProblem {
  readonly message: string;
  readonly position: number;
  readonly path: string;
  /** Nested deeper than policy.maxBodyDepth: the gateway's own limit, not a syntax error. */
  readonly tooDeep?: boolean;
}

/** An open object (with the span of its current key, for the field path) or array. */
type Frame = { kind: 'object'; keyStart: number; keyEnd: number } | { kind: 'array'; index: number };

function fieldPath(text: string, frames: readonly Frame[]): string {
  let path = '';
  for (const frame of frames) {
    if (frame.kind === 'array') path += `[${frame.index}]`;
    else if (frame.keyStart >= 0) {
      const key = JSON.parse(text.slice(frame.keyStart, frame.keyEnd)) as string;
      path += path === '' ? key : `.${key}`;
    }
  }
  return path;
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
/** A number literal that reads back as itself through String(JSON.parse(literal)); `-0` does not. */
const PLAIN_INTEGER = /0|-?[1-9]\d{0,14}/y;
const HEX4 = /^[0-9a-fA-F]{4}$/;

function isWhitespace(code: number): boolean {
  return code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09;
}

function describeAt(text: string, position: number): string {
  if (position >= text.length) return 'the end of the body';
  const code = text.codePointAt(position)!;
  const character = String.fromCodePoint(code);
  // Invisible characters (controls, a byte order mark, spaces) are named by their code point.
  const shown = /[\p{C}\p{Z}]/u.test(character) ? `U+${code.toString(16).toUpperCase().padStart(4, '0')}` : `'${character}'`;
  return `character ${shown}`;
}

/**
 * A strict RFC 8259 syntax check (what jawn accepts) that also bounds the nesting depth, without
 * recursion: the precise account (position, field path) of why a body was refused. Returns the
 * first problem, or undefined.
 */
export function checkJsonSyntax(text: string, maxDepth: number): JsonProblem | undefined {
  const frames: Frame[] = [];
  const length = text.length;
  let i = 0;
  const skip = () => {
    while (i < length && isWhitespace(text.charCodeAt(i))) i++;
  };
  const problem = (message: string): JsonProblem => ({ message, position: i, path: fieldPath(text, frames) });
  // A character loop, not a regular expression: a 10 MB string must not exhaust the regex engine.
  // Leaves i after the closing quote; returns a problem, or undefined.
  const scanString = (): JsonProblem | undefined => {
    let j = i + 1;
    for (;;) {
      if (j >= length) {
        i = length;
        return problem('Unterminated string');
      }
      const c = text.charCodeAt(j);
      if (c === 0x22) break;
      if (c < 0x20) {
        i = j;
        return problem(`Unescaped control ${describeAt(text, j)} in a string`);
      }
      if (c === 0x5c) {
        const next = text[j + 1];
        if (next === 'u') {
          if (!HEX4.test(text.slice(j + 2, j + 6))) {
            i = j;
            return problem('Invalid \\u escape in a string');
          }
          j += 6;
          continue;
        }
        if (next === undefined || !'"\\/bfnrt'.includes(next)) {
          i = j;
          return problem('Invalid escape in a string');
        }
        j += 2;
        continue;
      }
      j++;
    }
    i = j + 1;
    return undefined;
  };

  // States: a value is expected; a value just ended; an object key (or `}`) is expected.
  let state: 'value' | 'valueOrEnd' | 'after' | 'keyOrEnd' | 'key' = 'value';
  for (;;) {
    skip();
    const c = i < length ? text.charCodeAt(i) : -1;
    if (state === 'after') {
      const top = frames[frames.length - 1];
      if (top === undefined) return i < length ? problem(`Unexpected ${describeAt(text, i)} after the JSON value`) : undefined;
      if (top.kind === 'object') {
        if (c === 0x2c /* , */) { i++; top.keyStart = -1; state = 'key'; continue; }
        if (c === 0x7d /* } */) { i++; frames.pop(); continue; }
        return problem(`Expected ',' or '}' after a property value, found ${describeAt(text, i)}`);
      }
      if (c === 0x2c /* , */) { i++; top.index++; state = 'value'; continue; }
      if (c === 0x5d /* ] */) { i++; frames.pop(); continue; }
      return problem(`Expected ',' or ']' after an array element, found ${describeAt(text, i)}`);
    }
    if (state === 'keyOrEnd' || state === 'key') {
      const top = frames[frames.length - 1] as { kind: 'object'; keyStart: number; keyEnd: number };
      if (state === 'keyOrEnd' && c === 0x7d /* } */) { i++; frames.pop(); state = 'after'; continue; }
      if (c !== 0x22 /* " */) return problem(`Expected a double-quoted property name, found ${describeAt(text, i)}`);
      const keyStart = i;
      const failed = scanString();
      if (failed !== undefined) return failed;
      top.keyStart = keyStart;
      top.keyEnd = i;
      skip();
      if (text.charCodeAt(i) !== 0x3a /* : */) return problem(`Expected ':' after a property name, found ${describeAt(text, i)}`);
      i++;
      state = 'value';
      continue;
    }
    // A value.
    if (state === 'valueOrEnd' && c === 0x5d /* ] */) { i++; frames.pop(); state = 'after'; continue; }
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (frames.length >= maxDepth) return { ...problem(`The body is nested deeper than ${maxDepth} levels (policy.maxBodyDepth)`), tooDeep: true };
      i++;
      if (c === 0x7b) { frames.push({ kind: 'object', keyStart: -1, keyEnd: -1 }); state = 'keyOrEnd'; }
      else { frames.push({ kind: 'array', index: 0 }); state = 'valueOrEnd'; }
      continue;
    }
    if (c === 0x22 /* " */) {
      const failed = scanString();
      if (failed !== undefined) return failed;
    } else if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) {
      NUMBER.lastIndex = i;
      if (!NUMBER.test(text)) return problem(`Invalid number at ${describeAt(text, i)}`);
      i = NUMBER.lastIndex;
    } else if (text.startsWith('true', i)) i += 4;
    else if (text.startsWith('false', i)) i += 5;
    else if (text.startsWith('null', i)) i += 4;
    else return problem(i >= length ? 'Unexpected end of the body, a value was expected' : `Unexpected ${describeAt(text, i)}, a value was expected`);
    state = 'after';
  }
}

/** A parsed body: the value, and the exact source digits of every number in it. */
export interface ParsedBody {
  readonly value: unknown;
  /** The number's text as sent (e.g. "9223372036854775807", "1.50e3"), by its holder and key. */
  numberText(holder: object, key: string): string | undefined;
}

function lineAndColumn(text: string, position: number): string {
  let line = 1;
  let lineStart = 0;
  for (let i = 0; i < position && i < text.length; i++) {
    if (text.charCodeAt(i) === 0x0a) {
      line++;
      lineStart = i + 1;
    }
  }
  return `line ${line} column ${position - lineStart + 1}`;
}

/** What the quick pass over a body found (see measureJson). */
interface JsonShape {
  /** Nested deeper than maxDepth (the pass stops there). */
  readonly tooDeep: boolean;
  /**
   * Every number literal is an integer of at most 15 digits (no fraction, exponent or `-0`), so
   * String(value) gives back its exact text and no number needs its source kept.
   */
  readonly plainNumbers: boolean;
}

/** The index just past the string that opens at `start` (its closing quote), or the text's length. */
function stringEnd(text: string, start: number): number {
  let quote = text.indexOf('"', start + 1);
  while (quote !== -1) {
    let backslashes = 0;
    for (let k = quote - 1; text.charCodeAt(k) === 0x5c; k--) backslashes++;
    if (backslashes % 2 === 0) return quote + 1;
    quote = text.indexOf('"', quote + 1); // an escaped quote
  }
  return text.length;
}

/**
 * The quick pass every body gets before JSON.parse: how deep it nests and whether any number needs
 * its source text. Strings, most of a body, are skipped with indexOf; only what lies between them is
 * looked at. Exact for valid JSON. For anything else its answer does not matter: JSON.parse refuses
 * the text, and checkJsonSyntax then says where and why.
 */
function measureJson(text: string, maxDepth: number): JsonShape {
  const length = text.length;
  let depth = 0;
  let plainNumbers = true;
  let i = 0;
  while (i < length) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      i = stringEnd(text, i);
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (++depth > maxDepth) return { tooDeep: true, plainNumbers };
      i++;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      depth--;
      i++;
    } else if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) {
      NUMBER.lastIndex = i;
      if (!NUMBER.test(text)) {
        i++; // not a number: JSON.parse refuses the text
        continue;
      }
      if (plainNumbers) {
        PLAIN_INTEGER.lastIndex = i;
        plainNumbers = PLAIN_INTEGER.test(text) && PLAIN_INTEGER.lastIndex === NUMBER.lastIndex;
      }
      i = NUMBER.lastIndex;
    } else {
      i++;
    }
  }
  return { tooDeep: false, plainNumbers };
}

/** A body the participant's JSON decoder refuses: answered as its decode failure (errors.ts DECODE_FAILURE). */
function undecodable(cause: string): GatewayError {
  return new GatewayError(Errors.DECODE_FAILURE, { cause });
}

function malformedJson(text: string, { message, position, path, tooDeep }: JsonProblem): GatewayError {
  const where = `${lineAndColumn(text, position)} (position ${position})${path === '' ? '' : `, in ${path}`}`;
  return tooDeep === true
    ? malformed(`${message} at ${where}.`)
    : undecodable(`Malformed JSON: ${message} at ${where}`);
}

/**
 * Parses a rule-checked body. A quick pass bounds the depth before anything is built (a 10 MB body
 * of `[` must not become millions of arrays); then JSON.parse, which keeps `__proto__` as a plain own
 * key (no prototype is touched). A text JSON.parse refuses, or one too deep, gets checkJsonSyntax's precise
 * account of its first problem. When a number's text may differ from String(value) (more than 15
 * digits, a fraction, an exponent, `-0`), the body is parsed again with a reviver that reads each
 * number's source text (JSON.parse source text access, Node ≥ 21), so an int64 above 2^53 is
 * judged on its exact digits. Bodies without such numbers, nearly all, skip the reviver: it costs
 * eight times the parse.
 */
export function parseJsonBody(text: string, maxDepth: number): ParsedBody {
  if (text.trim() === '') throw undecodable('Malformed JSON: the body is empty; this route needs a JSON object');
  const shape = measureJson(text, maxDepth);
  let value: unknown;
  let parseError: Error | undefined;
  if (!shape.tooDeep) {
    try {
      value = JSON.parse(text);
    } catch (error) {
      parseError = error as Error;
    }
  }
  if (shape.tooDeep || parseError !== undefined) {
    const problem = checkJsonSyntax(text, maxDepth);
    if (problem !== undefined) throw malformedJson(text, problem);
    throw undecodable(`Malformed JSON: ${parseError?.message ?? 'unreadable'}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw undecodable("Got value with wrong type, expecting object at ''");
  }
  if (shape.plainNumbers) return { value, numberText: plainNumberText };
  const sources = new WeakMap<object, Map<string, string>>();
  let revived: object;
  try {
    revived = JSON.parse(text, function (this: object, key: string, parsed: unknown, context?: { source?: string }) {
      if (typeof parsed === 'number') {
        let byKey = sources.get(this);
        if (byKey === undefined) sources.set(this, (byKey = new Map()));
        byKey.set(key, context?.source ?? String(parsed));
      }
      return parsed;
    } as (this: unknown, key: string, value: unknown) => unknown) as object;
  } catch (error) {
    // V8 revives recursively: a body nested some thousands deep (policy.maxBodyDepth allows 10,000)
    // overflows the stack here although JSON.parse alone read it.
    throw malformed(`The request body is nested too deeply to read its numbers exactly (${(error as Error).message}); nest it less deeply, or lower policy.maxBodyDepth.`);
  }
  return { value: revived, numberText: (holder, key) => sources.get(holder)?.get(key) };
}

/** numberText of a body whose numbers all read back as themselves (JsonShape.plainNumbers). */
function plainNumberText(holder: object, key: string): string | undefined {
  if (!Object.hasOwn(holder, key) || (Array.isArray(holder) && key === 'length')) return undefined;
  const value = (holder as Record<string, unknown>)[key];
  return typeof value === 'number' ? String(value) : undefined;
}
