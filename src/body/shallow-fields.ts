// The few fields a route is read for (a submission's userId, the audit trail's identifying fields),
// taken from a body as its bytes arrive, by @streamparser/json's tokenizer: no tree is built, each
// chunk costs work in proportion to its own size (no stall of the event loop at any body size), and
// what is kept is the body's first four levels (the top-level fields, the envelopes such as
// `commands`, a list's items and theirs), each string cut, each list and the whole bounded.
import { isUtf8 } from 'node:buffer';
import { TextDecoder } from 'node:util';
import { TokenType as Token, Tokenizer } from '@streamparser/json';
import { Errors, GatewayError } from '../errors.js';

/**
 * A kept string's and a kept list's most characters and items: one more than the audit trail records
 * (512 bytes of text, 100 items), so that its own cut, in bytes, sees there was more and names it.
 */
export const KEPT_TEXT = 513;
export const KEPT_ITEMS = 101;
/**
 * Levels kept: the top, an envelope or a list, its items, and theirs (a command's kind and its
 * templateId, choice, contractId: what the audit trail records of each).
 */
const KEPT_DEPTH = 4;
/** Values kept from one body, all levels together (a body of a million keys keeps no more). */
export const KEPT_VALUES = 10_000;
/**
 * The tokenizer builds each string whole before it is cut: a token's bytes past this many are counted
 * (`countText`) at TEXT_COST each: its pieces, the flat string they become, and the copy of the bytes
 * the read makes. Sixteen bodies of one 8 MiB string held 262 MiB uncounted, 224 to 239 at two, 210
 * to 220 at three, against 189 to 210 for bodies of 3 KB strings (issue 42's L1, 75% of the pod: 240).
 */
const UNCOUNTED_TEXT_BYTES = 64 * 1024;
const TEXT_COST = 3;

type Scalar = string | number | boolean | null;
type Kept = Scalar | Kept[] | { [key: string]: Kept };

/** An open object or array: for an object, its current key; `kept` where its fields are kept. */
interface Frame {
  readonly isObject: boolean;
  key: string | undefined;
  /** The object the fields of this one go to (the top level, an envelope), or a list being kept. */
  readonly into: { [key: string]: Kept } | Kept[] | undefined;
}

/** A long string cut to KEPT_TEXT, copied: V8's slice would keep the whole string alive beneath it. */
const keep = (value: Scalar): Scalar =>
  typeof value === 'string' && value.length > KEPT_TEXT
    ? Buffer.from(value.slice(0, KEPT_TEXT), 'utf16le').toString('utf16le')
    : value;

function undecodable(cause: string): GatewayError {
  return new GatewayError(Errors.DECODE_FAILURE, { cause });
}

/**
 * Feeds a body's chunks as they arrive (`write`), then `end` gives its shallow object: its first
 * KEPT_DEPTH levels, strings cut at KEPT_TEXT, lists at KEPT_ITEMS, at most KEPT_VALUES values.
 * Not JSON, or not an object: the participant's decode failure; nested past `maxDepth`: the gateway's
 * own 400, as parseJsonObject refuses them.
 */
export class ShallowFields {
  private readonly tokenizer = new Tokenizer({ stringBufferSize: 64 * 1024 });
  private readonly stack: Frame[] = [];
  private readonly top: { [key: string]: Kept } = {};
  private keptValues = 0;
  private failure: GatewayError | undefined;
  private sawValue = false;
  /**
   * Set from the first chunk that is not whole UTF-8 (a malformed sequence, or a character cut at
   * the chunk's end): the rest is decoded here, malformed sequences read as U+FFFD as the
   * participant's decoder reads them (body/charset.ts), where the tokenizer would refuse the body.
   */
  private decoder: TextDecoder | undefined;
  /** Bytes given to the tokenizer, where its last token began, and up to where long tokens were counted. */
  private written = 0;
  private lastTokenAt = 0;
  private countedTo = 0;
  /** What long tokens were counted at, all together: given back once the body is tokenized. */
  private textCounted = 0;

  /**
   * `rulesRead`: keys kept whenever they are within the kept levels (those a rule judges).
   * `countText`: counts what long strings hold (the body budget's takeBeside), or refuses the body.
   */
  constructor(
    private readonly maxDepth: number,
    private readonly rulesRead: ReadonlySet<string> = new Set(),
    private readonly countText?: (bytes: number) => GatewayError | undefined,
  ) {
    this.tokenizer.onToken = ({ token, value, offset }) => {
      this.lastTokenAt = offset;
      this.onToken(token, value);
    };
    this.tokenizer.onError = (error) => {
      this.failure ??= undecodable(`Malformed JSON: ${error.message}`);
    };
  }

  /** Tokenizes the next bytes; throws the body's refusal as soon as it is known. */
  write(chunk: Uint8Array): void {
    if (this.decoder === undefined && !isUtf8(chunk)) this.decoder = new TextDecoder('utf-8');
    if (this.failure === undefined) {
      const input = this.decoder === undefined ? chunk : Buffer.from(this.decoder.decode(chunk, { stream: true }));
      this.tokenizer.write(input);
      this.written += input.length;
      this.countLongToken();
    }
    if (this.failure !== undefined) throw this.failure;
  }

  /**
   * A token being built holds what arrived since the last token began (a string, or a number, gathered
   * whole before it is emitted): past UNCOUNTED_TEXT_BYTES that gap is counted, at TEXT_COST a byte.
   */
  private countLongToken(): void {
    const from = Math.max(this.lastTokenAt + UNCOUNTED_TEXT_BYTES, this.countedTo);
    if (this.countText === undefined || this.written <= from) return;
    const bytes = (this.written - from) * TEXT_COST;
    const refused = this.countText(bytes);
    if (refused === undefined) this.textCounted += bytes;
    this.failure ??= refused;
    this.countedTo = this.written;
  }

  /** Bytes counted for long tokens (countText), which the tokenizer no longer holds once it ended. */
  get countedTextBytes(): number {
    return this.textCounted;
  }

  /** The shallow object, once the whole body was written. */
  end(): Record<string, unknown> {
    const rest = this.decoder?.decode();
    if (rest !== undefined && rest !== '' && this.failure === undefined) this.tokenizer.write(rest);
    if (!this.sawValue && this.failure === undefined)
      throw undecodable('Malformed JSON: the body is empty; this route needs a JSON object');
    if (this.failure === undefined && !this.tokenizer.isEnded) this.tokenizer.end();
    if (this.failure === undefined && this.stack.length > 0)
      this.failure = undecodable('Malformed JSON: unexpected end');
    if (this.failure !== undefined) throw this.failure;
    return this.top;
  }

  private onToken(token: Token, value: Scalar): void {
    const frame = this.stack[this.stack.length - 1];
    if (token === Token.COLON || token === Token.COMMA) return;
    if (token === Token.RIGHT_BRACE || token === Token.RIGHT_BRACKET) {
      this.stack.pop();
      return;
    }
    if (frame === undefined) {
      if (this.sawValue || token !== Token.LEFT_BRACE) {
        this.failure ??= undecodable("Got value with wrong type, expecting object at ''");
        this.tokenizer.error(this.failure);
        return;
      }
      this.sawValue = true;
      this.stack.push({ isObject: true, key: undefined, into: this.top });
      return;
    }
    // An object's key: a string where a key is expected.
    if (frame.isObject && frame.key === undefined && typeof value === 'string' && token !== Token.LEFT_BRACE) {
      frame.key = value;
      return;
    }
    this.onValue(frame, token, value);
  }

  private onValue(frame: Frame, token: Token, value: Scalar): void {
    const opens = token === Token.LEFT_BRACE || token === Token.LEFT_BRACKET;
    const key = frame.key;
    if (frame.isObject) frame.key = undefined;
    if (opens && this.stack.length >= this.maxDepth) {
      this.failure ??= new GatewayError(Errors.GATEWAY_MALFORMED_REQUEST, {
        cause: `The body is nested deeper than ${this.maxDepth} levels.`,
      });
      this.tokenizer.error(this.failure);
      return;
    }
    // Kept: what lies within KEPT_DEPTH levels, while fewer than KEPT_VALUES values are kept.
    // The keys a rule reads (a userId) are kept whatever the count, within those levels.
    const withinBudget = this.keptValues < KEPT_VALUES || (key !== undefined && this.rulesRead.has(key));
    const keeps = frame.into !== undefined && withinBudget && (!opens || this.stack.length < KEPT_DEPTH);
    // A key a rule reads is judged whole (a long userId equal to the token's must still match).
    const ruleReads = key !== undefined && this.rulesRead.has(key);
    const kept: Kept | undefined = !keeps
      ? undefined
      : !opens
        ? ruleReads
          ? value
          : keep(value)
        : token === Token.LEFT_BRACKET
          ? []
          : {};
    const into = frame.into;
    let attached = false;
    if (Array.isArray(into)) {
      attached = kept !== undefined && into.length < KEPT_ITEMS;
      if (attached) into.push(kept!);
    } else if (into !== undefined && key !== undefined) {
      // A repeated key keeps its last value, as JSON.parse and circe do (one not kept is dropped).
      attached = kept !== undefined;
      if (attached) into[key] = kept!;
      else delete into[key];
    }
    if (attached) this.keptValues++;
    if (!opens) return;
    const below = attached && typeof kept === 'object' && kept !== null ? kept : undefined;
    this.stack.push({ isObject: token === Token.LEFT_BRACE, key: undefined, into: below });
  }
}
