// A rule-checked body as JSON. JSON.parse reads strict RFC 8259 JSON as the participant's decoder
// (circe over jawn) does, a repeated key keeping its last value in both (circe's `CirceSupportParser`:
// LinkedHashMap.put), and keeps `__proto__` as a plain own key. One quick pass before it bounds the
// nesting (a body of `[` must not become a million arrays) and keeps the source text of the few numbers
// a rule judges on their exact digits (an int64 above 2^53 is no double): nothing is kept for the other
// numbers, and there is no reviver (with one, V8 keeps the source text of every value of the body).
import { Errors, GatewayError } from '../errors.js';
import { stringEnd, treeTooLarge, type TreeBounds } from './tree-size.js';

export interface JsonBody {
  /** The body: always a JSON object. */
  readonly value: Record<string, unknown>;
  /** The text as sent of the number at one of the declared key paths; undefined when that value is no number. */
  readonly numberText: (path: string) => string | undefined;
}

export interface JsonReading {
  /** Deepest nesting allowed (objects and arrays). */
  readonly maxDepth: number;
  /** Dotted paths of object keys ("commands.tapsMaxPasses"; no arrays) of the numbers whose text is kept. */
  readonly exactNumbers: readonly string[];
  /** Where the tree is built in a bounded heap: how large it may be (past it: 413, before it is built). */
  readonly treeBounds?: TreeBounds;
}

/** A node of the declared key paths: the keys that continue a path, and the path a key ends. */
interface PathNode {
  readonly children: Map<string, PathNode>;
  /** The declared paths at or under this node. */
  readonly paths: string[];
  ends?: string;
}

const pathTrees = new WeakMap<readonly string[], PathNode>();

function pathTree(paths: readonly string[]): PathNode {
  let root = pathTrees.get(paths);
  if (root !== undefined) return root;
  root = { children: new Map(), paths: [...paths] };
  for (const path of paths) {
    let node = root;
    for (const key of path.split('.')) {
      let child = node.children.get(key);
      if (child === undefined) node.children.set(key, (child = { children: new Map(), paths: [] }));
      child.paths.push(path);
      node = child;
    }
    node.ends = path;
  }
  pathTrees.set(paths, root);
  return root;
}

/** An open object or array; `keys` is set on an object along a declared path, `key` is its current key there. */
interface Frame {
  readonly isObject: boolean;
  readonly keys: PathNode | undefined;
  key: PathNode | undefined;
}

/** Off every declared path a frame never changes: one shared frame each, not one per bracket. */
const OFF_PATH_OBJECT: Frame = Object.freeze({ isObject: true, keys: undefined, key: undefined });
const OFF_PATH_ARRAY: Frame = Object.freeze({ isObject: false, keys: undefined, key: undefined });

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/** The key a string literal spells (escapes read), or its raw text when it does not parse. */
function keyOf(text: string, start: number, end: number): string {
  const raw = text.slice(start + 1, end - 1);
  if (!raw.includes('\\')) return raw;
  try {
    return JSON.parse(text.slice(start, end)) as string;
  } catch {
    return raw; // not JSON: JSON.parse refuses the body
  }
}

type Scan = { readonly tooDeepAt: number } | { readonly numbers: ReadonlyMap<string, string> };

/**
 * The quick pass: strings are skipped with indexOf, keys are read only in objects along a declared
 * path. Exact for valid JSON; for any other text its answer does not matter (JSON.parse refuses it).
 */
function scan(text: string, maxDepth: number, declared: PathNode): Scan {
  const numbers = new Map<string, string>();
  const stack: Frame[] = [];
  const length = text.length;
  let expectKey = false;
  let i = 0;
  while (i < length) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const end = stringEnd(text, i);
      const top = stack[stack.length - 1];
      if (expectKey && top?.keys !== undefined) top.key = top.keys.children.get(keyOf(text, i, end));
      expectKey = false;
      i = end;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (stack.length >= maxDepth) return { tooDeepAt: i };
      const top = stack[stack.length - 1];
      const isObject = c === 0x7b;
      const keys = !isObject ? undefined : top === undefined ? declared : top.isObject ? top.key : undefined;
      stack.push(
        keys !== undefined && keys.children.size > 0
          ? { isObject, keys, key: undefined }
          : isObject
            ? OFF_PATH_OBJECT
            : OFF_PATH_ARRAY,
      );
      expectKey = isObject;
      i++;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
      expectKey = false;
      i++;
    } else if (c === 0x2c /* , */) {
      expectKey = stack[stack.length - 1]?.isObject === true;
      i++;
    } else if (c === 0x3a /* : */) {
      i++;
      const key = stack[stack.length - 1]?.key;
      if (key === undefined) continue;
      // A later occurrence of a key replaces what an earlier one held, as in JSON.parse.
      for (const path of key.paths) numbers.delete(path);
      if (key.ends === undefined) continue;
      while (i < length && /[ \t\n\r]/.test(text[i]!)) i++;
      NUMBER.lastIndex = i;
      if (NUMBER.test(text)) numbers.set(key.ends, text.slice(i, NUMBER.lastIndex));
    } else {
      i++;
    }
  }
  return { numbers };
}

/** A body the participant's JSON decoder refuses: answered as its decode failure (errors.ts DECODE_FAILURE). */
function undecodable(cause: string): GatewayError {
  return new GatewayError(Errors.DECODE_FAILURE, { cause });
}

/**
 * Parses a rule-checked body, which must be a JSON object. Too deep: 400 GATEWAY_MALFORMED_REQUEST (the
 * gateway's own limit), before anything is built. Not JSON, or not an object: the decoder's refusal,
 * with JSON.parse's account of where.
 */
export function parseJsonObject(text: string, reading: JsonReading): JsonBody {
  if (text.trim() === '') throw undecodable('Malformed JSON: the body is empty; this route needs a JSON object');
  const scanned = scan(text, reading.maxDepth, pathTree(reading.exactNumbers));
  if ('tooDeepAt' in scanned) {
    throw new GatewayError(Errors.GATEWAY_MALFORMED_REQUEST, {
      cause: `The body is nested deeper than ${reading.maxDepth} levels (at position ${scanned.tooDeepAt}).`,
    });
  }
  const tooLarge = reading.treeBounds && treeTooLarge(text, reading.treeBounds);
  if (tooLarge !== undefined) {
    throw new GatewayError(Errors.GATEWAY_REQUEST_TOO_LARGE, {
      cause: `The request body would parse to ${tooLarge}, more than a rule-checked body may hold.`,
    });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw undecodable(`Malformed JSON: ${(error as Error).message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw undecodable("Got value with wrong type, expecting object at ''");
  }
  const { numbers } = scanned;
  return { value: value as Record<string, unknown>, numberText: (path) => numbers.get(path) };
}
