// The request id (x-request-id, the correlation id of error answers, reqId on log lines): a random
// UUID v4, as crypto.randomUUID() makes it, from the same CSPRNG. Written here because every call
// makes one: Node's builds its 36 characters by string concatenations (a rope, flattened again when
// the id is written or hashed), here they are written into a buffer and read out as one flat string;
// kept for the CPU it saves against crypto.randomUUID(), paired in docs/performance.md.
import { randomFillSync } from 'node:crypto';

/** Ids whose random bytes are drawn in one randomFillSync call. */
const BATCH = 256;
const random = Buffer.alloc(16 * BATCH);
let used = BATCH;

const HEX = '0123456789abcdef';
const HIGH = new Uint8Array(256);
const LOW = new Uint8Array(256);
for (let byte = 0; byte < 256; byte++) {
  HIGH[byte] = HEX.charCodeAt(byte >> 4);
  LOW[byte] = HEX.charCodeAt(byte & 15);
}
/** Where each of the 16 bytes is written in `xxxxxxxx-xxxx-4xxx-Nxxx-xxxxxxxxxxxx`. */
const AT = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];
const text = Buffer.alloc(36, '-');

/** A random (version 4, RFC 9562 §5.4) UUID in lower case. */
export function randomRequestId(): string {
  if (used === BATCH) {
    randomFillSync(random);
    used = 0;
  }
  const offset = 16 * used++;
  for (let i = 0; i < 16; i++) {
    let byte = random[offset + i]!;
    if (i === 6)
      byte = (byte & 0x0f) | 0x40; // version 4
    else if (i === 8) byte = (byte & 0x3f) | 0x80; // variant 10
    const at = AT[i]!;
    text[at] = HIGH[byte]!;
    text[at + 1] = LOW[byte]!;
  }
  return text.toString('latin1', 0, 36);
}
