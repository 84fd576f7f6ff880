// Frame boundaries on a tunnel: frames built by the ws library, cut into chunks anywhere.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as ws from 'ws';
import { closeFrame, FrameBoundaries, SERVICE_RESTART } from '../../src/proxy/websocket-frames.js';

// The ws library's own frame writer and reader (exported, not in its type declarations).
const { Sender, Receiver } = ws as unknown as {
  Sender: { frame(data: Buffer, options: Record<string, unknown>): Buffer[] };
  Receiver: new (options: { isServer: boolean }) => NodeJS.WritableStream & {
    on(event: 'conclude', listener: (code: number, reason: Buffer) => void): void;
  };
};

/** One frame as a server sends it (unmasked unless asked). */
function frame(opcode: number, payload: Buffer, fin = true, mask = false): Buffer {
  return Buffer.concat(
    Sender.frame(payload, { fin, opcode, mask, readOnly: false, rsv1: false, maskBuffer: Buffer.alloc(4, 7) }),
  );
}

describe('FrameBoundaries', () => {
  it('is between frames exactly where a frame ends, however the bytes are cut', () => {
    const frames = [
      frame(1, Buffer.from('{"update":1}')),
      frame(2, Buffer.alloc(126, 1)), // 16-bit length
      frame(1, Buffer.alloc(300, 2), false), // a fragmented message, with a ping between its fragments
      frame(9, Buffer.alloc(0)),
      frame(0, Buffer.alloc(70_000, 3)), // 64-bit length
      frame(1, Buffer.alloc(5, 4), true, true), // masked (a client's), counted all the same
    ];
    const stream = Buffer.concat(frames);
    const ends = new Set<number>();
    let offset = 0;
    for (const each of frames) ends.add((offset += each.length));
    fc.assert(
      fc.property(fc.uniqueArray(fc.integer({ min: 1, max: stream.length - 1 }), { maxLength: 40 }), (cuts) => {
        const boundaries = new FrameBoundaries();
        let from = 0;
        for (const to of [...cuts.sort((a, b) => a - b), stream.length]) {
          boundaries.feed(stream.subarray(from, to));
          expect(boundaries.atBoundary, `after byte ${to}`).toBe(ends.has(to));
          from = to;
        }
        expect(boundaries.sawClose).toBe(false);
      }),
      { numRuns: 200 },
    );
  });

  it("notices the participant's close frame", () => {
    const boundaries = new FrameBoundaries();
    boundaries.feed(frame(1, Buffer.from('x')));
    expect(boundaries.sawClose).toBe(false);
    const close = frame(8, Buffer.from([0x03, 0xe8]));
    boundaries.feed(close.subarray(0, 1));
    boundaries.feed(close.subarray(1));
    expect(boundaries.sawClose).toBe(true);
    expect(boundaries.atBoundary).toBe(true);
  });
});

describe('closeFrame', () => {
  it('is a close frame a WebSocket client reads: code 1012 and the reason', async () => {
    const receiver = new Receiver({ isServer: false });
    const concluded = new Promise<[number, string]>((resolve) =>
      receiver.on('conclude', (code: number, reason: Buffer) => resolve([code, reason.toString()])),
    );
    receiver.write(
      Buffer.concat([
        frame(1, Buffer.from('last update')),
        closeFrame(SERVICE_RESTART, 'participant replica changed; reconnect'),
      ]),
    );
    expect(await concluded).toEqual([1012, 'participant replica changed; reconnect']);
  });
});
