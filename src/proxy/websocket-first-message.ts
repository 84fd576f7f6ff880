// A stream's first message, held for its judge (exchange/first-message.ts): the client's bytes are
// kept, frame by frame (RFC 6455 §5.2: a client's frames are masked; a control frame may come between
// fragments, §5.4), until its first data message is whole, then judged; when allowed they go on to
// the participant as they came. At most the judge's maxBytes are held.

/** One whole frame at the start of `bytes`, or undefined while it is not whole. */
function frameAt(bytes: Buffer) {
  if (bytes.length < 2) return undefined;
  let length = bytes[1]! & 0x7f;
  let at = 2;
  if (length === 126) {
    if (bytes.length < 4) return undefined;
    length = bytes.readUInt16BE(2);
    at = 4;
  } else if (length === 127) {
    if (bytes.length < 10) return undefined;
    length = bytes.readUInt32BE(2) * 2 ** 32 + bytes.readUInt32BE(6);
    at = 10;
  }
  const masked = (bytes[1]! & 0x80) !== 0;
  const key = masked ? bytes.subarray(at, at + 4) : undefined;
  if (masked) at += 4;
  if (bytes.length < at + length) return undefined;
  const payload = Buffer.from(bytes.subarray(at, at + length));
  if (key !== undefined) for (let i = 0; i < payload.length; i++) payload[i] = payload[i]! ^ key[i % 4]!;
  return {
    size: at + length,
    opcode: bytes[0]! & 0x0f,
    fin: (bytes[0]! & 0x80) !== 0,
    /** RSV1: a compressed message (RFC 7692), which the gateway does not inflate. */
    compressed: (bytes[0]! & 0x40) !== 0,
    payload,
  };
}

export type FirstMessageRead =
  | { readonly state: 'more' }
  /** The first data message, unmasked and reassembled; null when compressed. */
  | { readonly state: 'whole'; readonly message: Buffer | null }
  | { readonly state: 'tooLarge' }
  /** A close frame came first: nothing to judge. */
  | { readonly state: 'closed' };

export class FirstMessageReader {
  private readonly held: Buffer[] = [];
  private heldBytes = 0;
  private unread: Buffer = Buffer.alloc(0);
  private fragments: Buffer[] = [];
  private compressed = false;

  constructor(private readonly maxBytes: number) {}

  /** Every byte taken so far, in order: what goes on to the participant when the message is allowed. */
  get bytes(): Buffer {
    return Buffer.concat(this.held);
  }

  take(chunk: Buffer): FirstMessageRead {
    this.held.push(chunk);
    this.heldBytes += chunk.length;
    if (this.heldBytes > this.maxBytes) return { state: 'tooLarge' };
    this.unread = this.unread.length === 0 ? chunk : Buffer.concat([this.unread, chunk]);
    for (let frame = frameAt(this.unread); frame !== undefined; frame = frameAt(this.unread)) {
      this.unread = this.unread.subarray(frame.size);
      if (frame.opcode === 0x8) return { state: 'closed' };
      if (frame.opcode >= 0x8) continue; // ping, pong
      if (frame.opcode !== 0x0) {
        this.fragments = [];
        this.compressed = frame.compressed;
      }
      this.fragments.push(frame.payload);
      if (frame.fin) return { state: 'whole', message: this.compressed ? null : Buffer.concat(this.fragments) };
    }
    return { state: 'more' };
  }
}
