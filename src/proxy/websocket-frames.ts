// Where WebSocket frames begin and end on a tunnel (RFC 6455 §5.2), so that the gateway can add a
// frame of its own between two of them: a close frame when a replica goes, keep-alive pings. A control frame may come between
// any two frames, even inside a fragmented message (§5.4), and is never compressed (RFC 7692 §6.1).

/** Close code 1012, Service Restart (IANA WebSocket Close Code Number Registry): reconnect. */
export const SERVICE_RESTART = 1012;

/** How long a frame's header is, from its second byte: 2, with the extended length and the mask key. */
function headerLengthOf(second: number): number {
  const length = second & 0x7f;
  return 2 + (length === 126 ? 2 : length === 127 ? 8 : 0) + ((second & 0x80) !== 0 ? 4 : 0);
}

/** A frame's payload length, from its whole header. */
function payloadLengthOf(header: Buffer): number {
  const length = header[1]! & 0x7f;
  if (length === 126) return header.readUInt16BE(2);
  if (length === 127) return header.readUInt32BE(2) * 2 ** 32 + header.readUInt32BE(6);
  return length;
}

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
      // A server's frames are never masked; a masked one is counted all the same.
      if (this.headerBytes === 2) this.headerLength = headerLengthOf(this.header[1]!);
      if (this.headerBytes >= 2 && this.headerBytes === this.headerLength) this.startPayload();
    }
  };

  private startPayload(): void {
    this.payloadLeft = payloadLengthOf(this.header);
    if ((this.header[0]! & 0x0f) === 0x8) this.sawClose = true;
    this.headerBytes = 0;
  }
}

const PING = 0x9;
const PONG = 0xa;
/** A control frame's payload is at most 125 bytes (RFC 6455 §5.5). */
const CONTROL_PAYLOAD_MAX = 125;

/**
 * One direction of a tunnel, frame by frame (RFC 6455 §5.2), for the gateway's keep-alive pings:
 * every byte is passed on as it came, in order and unchanged, but for the pongs that answer the
 * gateway's own pings (their payload is `ownPong`), which are dropped whole. A control frame
 * (at most 2 + 8 + 4 + 125 bytes) is held until it is whole, to be judged; a data frame is never held.
 * A frame of the gateway's own may be written to the destination whenever `atBoundary`.
 */
export class FrameRelay {
  /** A close frame went through: the close handshake is under way (no ping after it). */
  sawClose = false;
  /** Pongs dropped so far. */
  dropped = 0;
  /** Bytes that came from the source, pongs dropped included. */
  received = 0;
  private readonly header = Buffer.alloc(14);
  private headerBytes = 0;
  private headerLength = 2;
  private payloadLeft = 0;
  /** The frame under way is a control frame, held until whole (nothing of it is passed on yet). */
  private holding = false;
  private readonly payload = Buffer.alloc(CONTROL_PAYLOAD_MAX);
  private payloadBytes = 0;

  constructor(private readonly ownPong: Buffer) {}

  /** What has been passed on so far ends between two frames (a held frame has passed nothing). */
  get atBoundary(): boolean {
    return this.holding || (this.headerBytes === 0 && this.payloadLeft === 0);
  }

  /** Takes the bytes already passed on outside the relay (the head that came with the upgrade), in order. */
  observe(chunk: Buffer): void {
    this.relay(chunk, undefined);
  }

  /** Takes the next bytes from the source; returns what to write to the destination, in order. */
  pass(chunk: Buffer): Buffer[] {
    const out: Buffer[] = [];
    this.relay(chunk, out);
    return out;
  }

  /** Walks `chunk`; with `out`, control frames are held and judged and what goes on is pushed to it. */
  private relay(chunk: Buffer, out: Buffer[] | undefined): void {
    this.received += chunk.length;
    let run = 0; // where the bytes to pass on as they came begin
    let at = 0;
    while (at < chunk.length) {
      if (this.payloadLeft > 0) {
        const taken = Math.min(this.payloadLeft, chunk.length - at);
        if (this.holding) this.payloadBytes += chunk.copy(this.payload, this.payloadBytes, at, at + taken);
        this.payloadLeft -= taken;
        at += taken;
        if (this.holding && this.payloadLeft === 0) run = this.release(out!, at);
        continue;
      }
      if (this.headerBytes === 0) {
        // A control frame is held from its first byte; what came before it goes on now.
        this.holding = out !== undefined && (chunk[at]! & 0x08) !== 0;
        if (this.holding && at > run) out!.push(chunk.subarray(run, at));
      }
      this.header[this.headerBytes++] = chunk[at++]!;
      if (this.headerBytes === 2) this.headerLength = headerLengthOf(this.header[1]!);
      if (this.headerBytes < 2 || this.headerBytes !== this.headerLength) continue;
      this.headerBytes = 0;
      this.payloadLeft = payloadLengthOf(this.header);
      if ((this.header[0]! & 0x0f) === 0x8) this.sawClose = true;
      if (!this.holding) continue;
      if (this.payloadLeft > CONTROL_PAYLOAD_MAX) {
        // Not a frame RFC 6455 allows: passed on as it came, for the receiver to refuse.
        this.holding = false;
        out!.push(Buffer.from(this.header.subarray(0, this.headerLength)));
        run = at;
      } else if (this.payloadLeft === 0) {
        run = this.release(out!, at);
      }
    }
    if (out !== undefined && !this.holding && run < chunk.length) out.push(run === 0 ? chunk : chunk.subarray(run));
  }

  /**
   * A held control frame is whole: dropped when it is the pong to the gateway's ping, else passed on.
   * Returns `at`, where the bytes passed on as they came begin again.
   */
  private release(out: Buffer[], at: number): number {
    this.holding = false;
    const length = this.payloadBytes;
    this.payloadBytes = 0;
    if ((this.header[0]! & 0x0f) === PONG && this.isOwnPong(length)) this.dropped += 1;
    else out.push(Buffer.concat([this.header.subarray(0, this.headerLength), this.payload.subarray(0, length)]));
    return at;
  }

  private isOwnPong(length: number): boolean {
    if (length !== this.ownPong.length) return false;
    const masked = (this.header[1]! & 0x80) !== 0;
    const key = masked ? this.header.subarray(this.headerLength - 4, this.headerLength) : undefined;
    for (let i = 0; i < length; i++) {
      const byte = key === undefined ? this.payload[i]! : this.payload[i]! ^ key[i % 4]!;
      if (byte !== this.ownPong[i]) return false;
    }
    return true;
  }
}

/**
 * A ping frame carrying `payload` (at most 125 bytes): unmasked from the gateway as the server of the
 * client's connection, masked with a fresh key as the client of the participant's (RFC 6455 §5.3).
 */
export function pingFrame(payload: Buffer, maskKey?: Buffer): Buffer {
  const frame = Buffer.alloc(2 + (maskKey === undefined ? 0 : 4) + payload.length);
  frame[0] = 0x80 | PING; // FIN, opcode 9
  frame[1] = (maskKey === undefined ? 0 : 0x80) | payload.length;
  if (maskKey === undefined) {
    payload.copy(frame, 2);
    return frame;
  }
  maskKey.copy(frame, 2);
  for (let i = 0; i < payload.length; i++) frame[6 + i] = payload[i]! ^ maskKey[i % 4]!;
  return frame;
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

/**
 * Close code 1000 after a refusal message: the participant recovers a stream's error into one message
 * and completes the stream, and pekko-http closes a completed stream with 1000 (Canton `Endpoints.websocket`).
 */
export const NORMAL_CLOSURE = 1000;

/** A server's text frame (unmasked, FIN): one whole message. */
export function textFrame(text: string): Buffer {
  const payload = Buffer.from(text, 'utf8');
  const extended = payload.length < 126 ? 0 : payload.length < 65_536 ? 2 : 8;
  const frame = Buffer.alloc(2 + extended + payload.length);
  frame[0] = 0x81; // FIN, opcode 1 (text)
  if (extended === 0) frame[1] = payload.length;
  else if (extended === 2) {
    frame[1] = 126;
    frame.writeUInt16BE(payload.length, 2);
  } else {
    frame[1] = 127;
    frame.writeBigUInt64BE(BigInt(payload.length), 2);
  }
  payload.copy(frame, 2 + extended);
  return frame;
}
