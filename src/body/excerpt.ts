// What is kept of a parsed body that is judged in a worker thread (policy/large-body-pool.ts): the
// tree itself never crosses back, only this bounded copy of its first levels, enough for the audit
// trail's identifying fields (audit/request-fields.ts reads down to a vetted package's id, seven
// levels in), each string and list cut one past what the trail records, as body/shallow-fields.ts cuts.
import { KEPT_ITEMS, KEPT_TEXT, KEPT_VALUES } from './shallow-fields.js';

/** Objects and arrays kept: the top, `changes`, a change, its `operation`, the variant, `packages`, a package. */
const EXCERPT_DEPTH = 7;

type Kept = string | number | boolean | null | Kept[] | { [key: string]: Kept };

/** A long string cut to KEPT_TEXT, copied so that it does not keep the whole string alive beneath it. */
const cut = (text: string): string =>
  text.length > KEPT_TEXT ? Buffer.from(text.slice(0, KEPT_TEXT), 'utf16le').toString('utf16le') : text;

/**
 * The first EXCERPT_DEPTH levels of `body`, in document order: strings cut at KEPT_TEXT, lists at
 * KEPT_ITEMS, at most KEPT_VALUES values. A `__proto__` key stays a plain own key, as JSON.parse keeps it.
 */
export function bodyExcerpt(body: Record<string, unknown>): Record<string, unknown> {
  let values = 0;
  const copy = (value: unknown, depth: number): Kept | undefined => {
    if (values >= KEPT_VALUES) return undefined;
    if (typeof value === 'string') return (values++, cut(value));
    if (typeof value === 'number' || typeof value === 'boolean' || value === null) return (values++, value);
    if (typeof value !== 'object' || depth >= EXCERPT_DEPTH) return undefined;
    values++;
    if (Array.isArray(value)) {
      const items: Kept[] = [];
      for (const item of value.slice(0, KEPT_ITEMS)) {
        const kept = copy(item, depth + 1);
        if (kept !== undefined) items.push(kept);
      }
      return items;
    }
    const fields: { [key: string]: Kept } = {};
    for (const [key, field] of Object.entries(value)) {
      const kept = copy(field, depth + 1);
      if (kept !== undefined) Object.defineProperty(fields, key, { value: kept, enumerable: true, writable: true });
    }
    return fields;
  };
  return copy(body, 0) as Record<string, unknown>;
}
