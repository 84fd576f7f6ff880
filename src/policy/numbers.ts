// Integers as the participant's JSON decoder (circe) reads them, judged on the exact digits sent.
// circe's Decoder[Long]/Decoder[Int] accept a JSON number that is a whole number within range,
// even written with a fraction or an exponent (`10.0`, `1e1`), and a JSON string holding such a
// number (`"42"`); older circe parsed strings with Java's Long.parseLong (`"+42"`). Both readings are
// accepted here: when unsure, the participant decides.

export const INT64_MIN = -(2n ** 63n);
export const INT64_MAX = 2n ** 63n - 1n;
export const INT32_MIN = -(2n ** 31n);
export const INT32_MAX = 2n ** 31n - 1n;

export type IntegerReading =
  { readonly ok: true; readonly value: bigint } | { readonly ok: false; readonly reason: string };

const JSON_NUMBER = /^(-)?(0|[1-9]\d*)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;
const JAVA_INTEGER = /^[+-]?\d+$/;

/** The value of a JSON number literal when it is a whole number of at most `maxDigits` digits. */
function wholeValue(text: string, maxDigits: number): IntegerReading {
  const match = JSON_NUMBER.exec(text);
  if (match === null) return { ok: false, reason: `${text} is not a number` };
  const [, minus, integral = '', fraction = '', exponentText = '0'] = match;
  let digits = (integral + fraction).replace(/^0+/, '');
  if (digits === '') return { ok: true, value: 0n };
  // The exponent may be absurdly long: anything beyond a few digits is out of any integer range.
  if (exponentText.replace(/^[+-]?0*/, '').length > 6) {
    return {
      ok: false,
      reason: exponentText.startsWith('-') ? `${text} is not a whole number` : `${text} is out of range`,
    };
  }
  let significant = digits.length;
  while (digits.charCodeAt(significant - 1) === 0x30 /* 0 */) significant--;
  const scale = Number(exponentText) - fraction.length + (digits.length - significant);
  digits = digits.slice(0, significant);
  if (scale < 0) return { ok: false, reason: `${text} is not a whole number` };
  if (digits.length + scale > maxDigits) return { ok: false, reason: `${text} is out of range` };
  const magnitude = BigInt(digits) * 10n ** BigInt(scale);
  return { ok: true, value: minus === undefined ? magnitude : -magnitude };
}

/**
 * Reads a JSON value as circe reads an integer field of the given range.
 * `source` is the number's text as sent (RuleContext.numberText); without it a JS number is read as is.
 */
export function readInteger(value: unknown, source: string | undefined, min: bigint, max: bigint): IntegerReading {
  let reading: IntegerReading;
  const maxDigits = max.toString().length;
  if (typeof value === 'number') {
    reading = wholeValue(source ?? (Number.isSafeInteger(value) ? String(value) : JSON.stringify(value)), maxDigits);
  } else if (typeof value === 'string') {
    reading = JSON_NUMBER.test(value)
      ? wholeValue(value, maxDigits)
      : JAVA_INTEGER.test(value) && value.replace(/^[+-]?0*/, '').length <= maxDigits
        ? { ok: true, value: BigInt(value.replace(/^\+/, '')) }
        : { ok: false, reason: `"${value.length > 40 ? `${value.slice(0, 40)}…` : value}" is not a number` };
  } else {
    return {
      ok: false,
      reason: `expected an integer, got ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value === 'object' ? 'an object' : `a ${typeof value}`}`,
    };
  }
  if (!reading.ok) return reading;
  if (reading.value < min || reading.value > max)
    return { ok: false, reason: `${reading.value} is out of range [${min}, ${max}]` };
  return reading;
}
