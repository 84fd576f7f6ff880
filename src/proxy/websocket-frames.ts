// Where the participant's WebSocket frames begin and end on a tunnel (RFC 6455 §5.2), so that the
// gateway can add a close frame of its own between two of them. A control frame may come between
// any two frames, even inside a fragmented message (§5.4), and is never compressed (RFC 7692 §6.1).

/** Close code 1012, Service Restart (IANA WebSocket Close Code Number Registry): reconnect. */
export const SERVICE_RESTART = 1012;

/** Counts the participant's frames as their bytes pass, headers only. */
export class FrameBoundaries {
  /** The participant sent a close frame: its close handshake is under way. */
  sawClose = false;
  private readonly header = Buffer.alloc(14);
  private headerBytes = 0;
  private headerLength = 2;
  private payloadLeft = 0;

  /** Between two frames: a frame of the gateway's own may be sent now. */
  get atBoundary(): boolean {
    return this.headerBytes === 0 && this.payloadLeft === 0;
  }

  /** Takes the next bytes from the participant, in order. */
  readonly feed = (chunk: Buffer): void => {
    let at = 0;
    while (at < chunk.length) {
      if (this.payloadLeft > 0) {
        const taken = Math.min(this.payloadLeft, chunk.length - at);
        this.payloadLeft -= taken;
        at += taken;
        continue;
      }
      this.header[this.headerBytes++] = chunk[at++]!;
      if (this.headerBytes === 2) {
        const length = this.header[1]! & 0x7f;
        const masked = (this.header[1]! & 0x80) !== 0; // a server's frames never are; counted all the same
        this.headerLength = 2 + (length === 126 ? 2 : length === 127 ? 8 : 0) + (masked ? 4 : 0);
      }
      if (this.headerBytes >= 2 && this.headerBytes === this.headerLength) this.startPayload();
    }
  };

  private startPayload(): void {
    const length = this.header[1]! & 0x7f;
    if (length === 126) this.payloadLeft = this.header.readUInt16BE(2);
    else if (length === 127) this.payloadLeft = this.header.readUInt32BE(2) * 2 ** 32 + this.header.readUInt32BE(6);
    else this.payloadLeft = length;
    if ((this.header[0]! & 0x0f) === 0x8) this.sawClose = true;
    this.headerBytes = 0;
  }
}

/** A server's close frame (unmasked, RFC 6455 §5.5.1): the code, then a reason of at most 123 bytes. */
export function closeFrame(code: number, reason: string): Buffer {
  const text = Buffer.from(reason, 'utf8').subarray(0, 123);
  const frame = Buffer.alloc(4 + text.length);
  frame[0] = 0x88; // FIN, opcode 8 (close)
  frame[1] = 2 + text.length;
  frame.writeUInt16BE(code, 2);
  text.copy(frame, 4);
  return frame;
}
