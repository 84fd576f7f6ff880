// How large a body's parsed tree would be, counted on its text before JSON.parse builds it: a worker
// that parses a rule-checked body has a bounded heap (policy/large-body-pool.ts), and a body whose
// tree passes it would first hold the worker for seconds of garbage collection near its limit (an
// 8 MiB body of empty objects: 12 s, 290 MiB resident, then the worker dies; docs/performance.md).
// Refused here in one linear pass instead.

export interface TreeBounds {
  /** Objects and arrays, the whole body together. */
  readonly containers: number;
  /** Objects, arrays, keys and scalar values, the whole body together. */
  readonly values: number;
  /** Keys of any one object (a large object is a hash table: each key costs several times a small object's). */
  readonly keysOfOneObject: number;
}

/** The index just past the string that opens at `start` (its closing quote), or the text's length. */
export function stringEnd(text: string, start: number): number {
  let quote = text.indexOf('"', start + 1);
  while (quote !== -1) {
    let backslashes = 0;
    for (let k = quote - 1; text.charCodeAt(k) === 0x5c; k--) backslashes++;
    if (backslashes % 2 === 0) return quote + 1;
    quote = text.indexOf('"', quote + 1); // an escaped quote
  }
  return text.length;
}

/** A scalar other than a string starts here: a digit, a minus sign, or the t, f, n of a literal. */
const startsScalar = (c: number) => (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x74 || c === 0x66 || c === 0x6e;

/**
 * What of `bounds` the tree of `text` would pass, said for a refusal; undefined when it stays within
 * them. Exact for valid JSON; any other text is JSON.parse's to refuse.
 */
export function treeTooLarge(text: string, bounds: TreeBounds): string | undefined {
  /** Keys counted so far in each open object (-1: an array), innermost last. */
  const keys: number[] = [];
  let containers = 0;
  let values = 0;
  let inScalar = false;
  for (let i = 0; i < text.length;) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const end = stringEnd(text, i);
      const top = keys.length - 1;
      const isKey = top >= 0 && keys[top]! >= 0 && text.charCodeAt(nextSignificant(text, end)) === 0x3a;
      if (isKey && ++keys[top]! > bounds.keysOfOneObject)
        return `an object of more than ${bounds.keysOfOneObject} keys`;
      values++;
      i = end;
      inScalar = false;
      continue;
    }
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      keys.push(c === 0x7b ? 0 : -1);
      if (++containers > bounds.containers) return `more than ${bounds.containers} objects and arrays`;
      values++;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) keys.pop();
    else if (!inScalar && startsScalar(c)) values++;
    inScalar = startsScalar(c) || c === 0x2e || c === 0x2b || (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a);
    if (values > bounds.values) return `more than ${bounds.values} values`;
    i++;
  }
  return undefined;
}

/** The index of the first character from `i` that is not JSON whitespace. */
function nextSignificant(text: string, i: number): number {
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return i;
    i++;
  }
  return i;
}
