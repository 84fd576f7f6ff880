// What one record may take on disk, in bytes: a string at most MAX_TEXT_BYTES of JSON text (UTF-8,
// escapes included: a byte the client sent as 0xFF is 3 bytes on disk, a control character 6), a
// list at most MAX_LIST items, each cut named in the record's `truncated`; and a whole record at most
// audit.maxRecordBytes, past which it sheds its body, then its request's fields, and says so in
// `shortened`. A caller's share of the trail (caller-share.ts) sheds the same way in failMode open.
import { recordText, type RecordFields, type RecordText } from './chain-writer.js';

/** The most bytes a string takes in a record (its JSON text, UTF-8, without the quotes). */
export const MAX_TEXT_BYTES = 512;
/** The most items a list keeps. */
export const MAX_LIST = 100;

/** The bytes of one code point of a string in JSON text (JSON.stringify's escapes). */
function jsonWidth(code: number): number {
  if (code === 0x22 || code === 0x5c) return 2; // \" \\
  if (code < 0x20) return code === 8 || code === 9 || code === 10 || code === 12 || code === 13 ? 2 : 6;
  if (code < 0x80) return 1;
  if (code < 0x800) return 2;
  if (code >= 0xd800 && code <= 0xdfff) return 6; // a lone surrogate: \udxxx
  return code < 0x10000 ? 3 : 4;
}

/** `value` cut to at most `maxBytes` of JSON text, on a code point boundary; undefined when it fits whole. */
export function cutText(value: string, maxBytes = MAX_TEXT_BYTES): string | undefined {
  if (value.length * 6 <= maxBytes) return undefined; // fits whatever it holds
  let used = 0;
  for (let i = 0; i < value.length;) {
    const code = value.codePointAt(i)!;
    used += jsonWidth(code);
    if (used > maxBytes) return value.slice(0, i);
    i += code >= 0x10000 ? 2 : 1;
  }
  return undefined;
}

/** Where the cuts of one object are named: its `truncated` list. */
export class Cuts {
  readonly names: string[] = [];

  /** `value` within MAX_TEXT_BYTES, the cut named. */
  text(name: string, value: string): string {
    const cut = cutText(value);
    if (cut === undefined) return value;
    this.mark(name);
    return cut;
  }

  /** The first MAX_LIST items, the cut named. */
  list<T>(name: string, items: readonly T[]): T[] {
    if (items.length <= MAX_LIST) return [...items];
    this.mark(name);
    return items.slice(0, MAX_LIST);
  }

  mark(name: string): void {
    if (!this.names.includes(name)) this.names.push(name);
  }

  /** Adds `truncated` to `into` when anything was cut. */
  into<T extends object>(into: T): T {
    if (this.names.length > 0) (into as Record<string, unknown>).truncated = this.names;
    return into;
  }
}

/** Why a record was shortened: over audit.maxRecordBytes, or its caller over its share (failMode open). */
export type ShortenedReason = 'maxRecordBytes' | 'callerShare';

/** The fields an intent keeps of its request when it sheds the rest: what finds the write at the participant. */
const KEPT_IDS = ['commandId', 'submissionId', 'workflowId', 'userId', 'party', 'partyIdHint', 'id'] as const;

function keptIds(request: unknown): Record<string, unknown> | undefined {
  if (request === null || typeof request !== 'object') return undefined;
  const kept: Record<string, unknown> = {};
  for (const key of KEPT_IDS) {
    const value = (request as Record<string, unknown>)[key];
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') kept[key] = value;
  }
  return kept;
}

/** A record's text with `bodyText` (JSON, already bounded) as its `body` field. */
function withBody(fields: RecordFields, bodyText: string | undefined): RecordText {
  if (bodyText === undefined) return recordText(fields);
  const text = `${JSON.stringify(fields).slice(0, -1)},"body":${bodyText}}`;
  return { text, bytes: Buffer.byteLength(text) };
}

/**
 * The record's text within `maxBytes`: whole when it fits; else without its body; then with only
 * the ids of its request (KEPT_IDS); each time said in `shortened` (its reason, its whole size,
 * what was left out). `reason` callerShare keeps only the ids whatever the size.
 */
export function boundedRecord(
  fields: RecordFields,
  maxBytes: number,
  bodyText?: string,
  reason?: ShortenedReason,
): RecordText & { readonly shortened?: ShortenedReason } {
  const whole = withBody(fields, bodyText);
  if (whole.bytes <= maxBytes && reason === undefined) return whole;
  const why: ShortenedReason = reason ?? 'maxRecordBytes';
  const shortened = (omitted: readonly string[], extra: Record<string, unknown> = {}) => ({
    ...recordText({ ...fields, ...extra, shortened: { reason: why, bytes: whole.bytes, omitted } }),
    shortened: why,
  });
  if (reason === undefined && bodyText !== undefined) {
    const withoutBody = shortened(['body']);
    if (withoutBody.bytes <= maxBytes) return withoutBody;
  }
  const omitted = bodyText === undefined ? ['request'] : ['body', 'request'];
  const idsOnly = 'request' in fields ? shortened(omitted, { request: keptIds(fields.request) }) : shortened([]);
  if (idsOnly.bytes <= maxBytes) return idsOnly;
  // Only fields of a bounded size are left: the record's kind, time and ids.
  const { kind, time, id, requestId, operation } = fields;
  const bare = { kind, time, id, requestId, operation, shortened: { reason: why, bytes: whole.bytes, omitted: ['*'] } };
  return { ...recordText(bare), shortened: why };
}
