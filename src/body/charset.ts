// A body's bytes as text, decoded the way the participant decodes them: pekko-http reads the
// declared charset with Java's decoders (UTF-8 when none is declared).
import { TextDecoder } from 'node:util';
import { Errors, GatewayError } from '../errors.js';

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
  ...[2, 3, 4, 5, 6, 7, 8, 13, 15].flatMap(
    (part) =>
      [
        [`iso-8859-${part}`, `iso-8859-${part}`],
        [`iso8859-${part}`, `iso-8859-${part}`],
      ] as const,
  ),
  ['iso-8859-16', 'iso-8859-16'],
  // Not 1255: TextDecoder reads its byte 0xCA as U+05BA, Java as undefined.
  ...[0, 1, 2, 3, 4, 6, 7, 8].flatMap(
    (page) =>
      [
        [`windows-125${page}`, `windows-125${page}`],
        [`cp125${page}`, `windows-125${page}`],
      ] as const,
  ),
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
 * The body as text in its declared charset (undefined: none declared). UTF-8, with malformed sequences
 * replaced as Java's decoder replaces them; ISO-8859-1 and US-ASCII exactly; the single-byte charsets
 * above through TextDecoder; any ASCII-compatible charset reads an all-ASCII body identically. Anything
 * else (UTF-16, whose byte order Java and TextDecoder guess differently, or a charset read differently
 * or unknown to either) the gateway cannot judge as the participant would: 415.
 */
/** Whether a body in `charset` (undefined: none declared) is read as UTF-8. */
export function readsAsUtf8(charset: string | undefined): boolean {
  return charset === undefined || UTF8_LABELS.has(charset.toLowerCase());
}

export function decodeBody(bytes: Buffer, charset: string | undefined): string {
  const label = charset?.toLowerCase();
  if (label === undefined || UTF8_LABELS.has(label)) return bytes.toString('utf8');
  if (LATIN1_LABELS.has(label)) return bytes.toString('latin1');
  if (ASCII_LABELS.has(label)) return bytes.toString('latin1').replace(/[\u0080-\u00ff]/g, '\ufffd');
  const decoderLabel = SINGLE_BYTE.get(label);
  if (decoderLabel !== undefined) return singleByteText(bytes, decoderLabel);
  if (ASCII_COMPATIBLE.test(label) && bytes.every((byte) => byte < 0x80)) return bytes.toString('latin1');
  throw new GatewayError(Errors.GATEWAY_UNSUPPORTED_MEDIA_TYPE, {
    cause: `The request body is declared as charset ${label}; this route's body must be UTF-8 JSON (or plain ASCII).`,
  });
}
