// What a request's Content-Type field lines declare, read as the participant reads them. pekko-http
// (`HttpHeaderParser`, `HttpMessageParser`) keeps a line whose value does not parse as a raw header,
// outside the body's content type; repeated lines that parse to the same type count once; lines that
// parse to different types refuse the request (`conflicting-content-type-header-processing-mode`,
// `error` by default in its reference.conf). Values are parsed per RFC 9110 §8.3.1.
import { safeParse } from 'fast-content-type-parse';

export interface ContentType {
  /** type/subtype, lower-cased. */
  readonly mediaType: string;
  /** Parameters by lower-cased name (the first of a repeated name), values unquoted. */
  readonly parameters: Readonly<Record<string, string>>;
}

/** A Content-Type value parsed, or undefined when it does not parse (it then declares nothing). */
export function parseContentType(value: string): ContentType | undefined {
  const parsed = safeParse(value);
  return parsed.type === '' ? undefined : { mediaType: parsed.type, parameters: parsed.parameters };
}

function isContentType(name: string): boolean {
  return name.length === 12 && name.toLowerCase() === 'content-type';
}

/** The values of a request's Content-Type lines, in order, from Node's raw header list (name, value, ...). */
function contentTypeValues(rawHeaders: readonly string[]): string[] {
  const values: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (isContentType(rawHeaders[i]!)) values.push(rawHeaders[i + 1]!);
  }
  return values;
}

/** The same type to pekko-http: media type and parameters, a charset's name in any case. */
function sameType(a: ContentType, b: ContentType): boolean {
  const names = Object.keys(a.parameters);
  if (a.mediaType !== b.mediaType || names.length !== Object.keys(b.parameters).length) return false;
  return names.every((name) =>
    name === 'charset'
      ? a.parameters[name]!.toLowerCase() === b.parameters[name]?.toLowerCase()
      : a.parameters[name] === b.parameters[name],
  );
}

/** The type a request's Content-Type lines declare: the first that parses; undefined when none does. */
export function declaredContentType(rawHeaders: readonly string[]): ContentType | undefined {
  for (const value of contentTypeValues(rawHeaders)) {
    const parsed = parseContentType(value);
    if (parsed !== undefined) return parsed;
  }
  return undefined;
}

/** Whether a request's Content-Type lines declare different types (a line that does not parse declares none). */
export function contentTypesConflict(rawHeaders: readonly string[]): boolean {
  // Nearly every request has at most one line, or lines alike: nothing is parsed for those.
  let first: string | undefined;
  let differ = false;
  for (let i = 0; i < rawHeaders.length && !differ; i += 2) {
    if (!isContentType(rawHeaders[i]!)) continue;
    const value = rawHeaders[i + 1]!;
    if (first === undefined) first = value;
    else differ = value !== first;
  }
  if (!differ) return false;
  let declared: ContentType | undefined;
  for (const value of contentTypeValues(rawHeaders)) {
    const parsed = parseContentType(value);
    if (parsed === undefined) continue;
    if (declared === undefined) declared = parsed;
    else if (!sameType(declared, parsed)) return true;
  }
  return false;
}
