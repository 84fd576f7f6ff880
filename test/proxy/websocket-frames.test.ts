// Frame boundaries on a tunnel: frames built by the ws library, cut into chunks anywhere.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as ws from 'ws';
import {
  closeFrame,
  FrameBoundaries,
  FrameRelay,
  pingFrame,
  SERVICE_RESTART,
} from '../../src/proxy/websocket-frames.js';

// The ws library's own frame writer and reader (exported, not in its type declarations).
const { Sender, Receiver } = ws as unknown as {
  Sender: { frame(data: Buffer, options: Record<string, unknown>): Buffer[] };
  Receiver: new (options: { isServer: boolean }) => NodeJS.WritableStream & {
    on(event: 'conclude', listener: (code: number, reason: Buffer) => void): void;
    on(event: 'ping', listener: (data: Buffer) => void): void;
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

describe('FrameRelay: one direction of a tunnel with the gateway keep-alive', () => {
  const own = Buffer.from('ledger-gateway keep-alive 12345678');
  // A client's frames (masked, as a client must) with a pong to the gateway's ping among them,
  // another pong, a ping of the client's own, a fragmented message and long frames.
  const client = [
    frame(1, Buffer.from('{"beginExclusive":0}'), true, true),
    frame(0xa, Buffer.from(own), true, true), // the pong to the gateway: dropped (ws masks a payload in place)
    frame(1, Buffer.alloc(300, 2), false, true), // a fragmented message...
    frame(9, Buffer.from('client ping'), true, true), // ...with the client's own ping between its fragments
    frame(0, Buffer.alloc(70_000, 3), true, true), // 64-bit length
    frame(0xa, Buffer.from('not the gateway'), true, true), // a pong to someone else: passed on
    frame(0xa, Buffer.alloc(0), true, true),
    frame(8, Buffer.from([0x03, 0xe8]), true, true),
  ];
  const stream = Buffer.concat(client);
  const expected = Buffer.concat(client.filter((_each, index) => index !== 1));
  /** After each frame of the source, whether what was passed on ends between two frames. */
  const ends = new Set<number>();
  let offset = 0;
  for (const each of client) ends.add((offset += each.length));

  it('passes every byte on unchanged and in order but the pong to the gateway, however the bytes are cut', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.integer({ min: 1, max: stream.length - 1 }), { maxLength: 40 }), (cuts) => {
        const relay = new FrameRelay(own);
        const out: Buffer[] = [];
        let from = 0;
        for (const to of [...cuts.sort((a, b) => a - b), stream.length]) {
          out.push(...relay.pass(stream.subarray(from, to)));
          // Between frames of the source, the destination is between frames too.
          if (ends.has(to)) expect(relay.atBoundary, `after byte ${to}`).toBe(true);
          from = to;
        }
        expect(Buffer.concat(out).equals(expected)).toBe(true);
        expect(relay.dropped).toBe(1);
        expect(relay.received).toBe(stream.length);
        expect(relay.sawClose).toBe(true);
      }),
      { numRuns: 200 },
    );
  });

  it('is never between frames inside a data frame it has passed part of', () => {
    const relay = new FrameRelay(own);
    const data = frame(2, Buffer.alloc(1000, 7));
    relay.pass(data.subarray(0, 3));
    expect(relay.atBoundary).toBe(false);
    relay.pass(data.subarray(3, 500));
    expect(relay.atBoundary).toBe(false);
    relay.pass(data.subarray(500));
    expect(relay.atBoundary).toBe(true);
    // A control frame held half-way has passed nothing yet: the destination is between frames.
    const ping = frame(9, Buffer.from('x'));
    expect(relay.pass(ping.subarray(0, 1))).toEqual([]);
    expect(relay.atBoundary).toBe(true);
    expect(Buffer.concat(relay.pass(ping.subarray(1))).equals(ping)).toBe(true);
  });

  it("passes the participant's unmasked pong to someone else on, drops the one to the gateway", () => {
    const relay = new FrameRelay(own);
    expect(relay.pass(frame(0xa, Buffer.from(own)))).toEqual([]);
    const other = frame(0xa, Buffer.from('ledger-gateway keep-alive 00000000'));
    expect(Buffer.concat(relay.pass(other)).equals(other)).toBe(true);
  });

  it('passes a control frame longer than RFC 6455 allows on as it came, for the receiver to refuse', () => {
    const relay = new FrameRelay(own);
    const oversized = frame(0xa, Buffer.alloc(200, 1));
    expect(Buffer.concat(relay.pass(oversized)).equals(oversized)).toBe(true);
    expect(relay.dropped).toBe(0);
  });

  it('takes the bytes the upgrade already passed on without holding them back', () => {
    const relay = new FrameRelay(own);
    const first = frame(1, Buffer.from('with the 101'));
    const ping = frame(9, Buffer.from('p'));
    relay.observe(Buffer.concat([first, ping.subarray(0, 2)])); // a control frame already under way
    expect(Buffer.concat(relay.pass(ping.subarray(2))).equals(ping.subarray(2))).toBe(true);
    expect(relay.atBoundary).toBe(true);
  });
});

describe('pingFrame', () => {
  it("is a ping a WebSocket peer reads, unmasked as a server's, masked as a client's", async () => {
    const payload = Buffer.from('ledger-gateway keep-alive 12345678');
    for (const [isServer, frameBytes] of [
      [false, pingFrame(payload)],
      [true, pingFrame(payload, Buffer.from([1, 2, 3, 4]))],
    ] as const) {
      const receiver = new Receiver({ isServer });
      const pinged = new Promise<Buffer>((resolve) => receiver.on('ping', resolve));
      receiver.write(frameBytes);
      expect((await pinged).equals(payload)).toBe(true);
    }
  });
});
