// websocket.keepAliveSeconds: the gateway pings both legs of a tunnel, so that a quiet stream outlives
// an idle cut on the way (pekko-http's idle-timeout, a load balancer's), drops the pongs that answer
// its pings, and passes every frame of the stream byte for byte. Real WebSocket peers on 127.0.0.1:
// the ws library's client and server, and raw peers that record every byte either way.
import { createHash } from 'node:crypto';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import * as wsModule from 'ws';
import WebSocket, { WebSocketServer } from 'ws';
import { MetricNames } from '../../src/telemetry/metrics.js';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { closeAfterEach } from '../helpers/per-test.js';

// The ws library's frame writer and reader (exported, not in its type declarations).
const { Sender, Receiver } = wsModule as unknown as {
  Sender: { frame(data: Buffer, options: Record<string, unknown>): Buffer[] };
  Receiver: new (options: { isServer: boolean }) => NodeJS.WritableStream & {
    on(event: 'ping' | 'pong', listener: (data: Buffer) => void): void;
  };
};

const KEEP_ALIVE = 'ledger-gateway keep-alive ';
/** The participant's idle cut, scaled down: pekko-http closes a connection idle for 60 s. */
const IDLE_CUT_MS = 2_500;

let gw: RunningGateway | undefined;
let upstream: { close(): Promise<void> } | undefined;
closeAfterEach(
  () => gw,
  () => upstream,
);

function frame(opcode: number, payload: Buffer, options: { fin?: boolean; mask?: boolean } = {}): Buffer {
  return Buffer.concat(
    Sender.frame(Buffer.from(payload), {
      fin: options.fin ?? true,
      opcode,
      mask: options.mask ?? false,
      readOnly: false,
      rsv1: false,
      maskBuffer: Buffer.from([9, 8, 7, 6]),
    }),
  );
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A ws server that, like pekko-http, closes a connection on which nothing moved for IDLE_CUT_MS, and
 * echoes every message; it keeps the pings and pongs it received.
 */
async function idleCuttingUpstream() {
  const pings: Buffer[] = [];
  const pongs: Buffer[] = [];
  const server = http.createServer((_request, response) => response.end('{"version":"3.5.10"}'));
  const wss = new WebSocketServer({ noServer: true, handleProtocols: () => 'daml.ws.auth' });
  server.on('upgrade', (request, socket, head) => {
    wss.handleUpgrade(request, socket, head, (client) => {
      (socket as net.Socket).setTimeout(IDLE_CUT_MS, () => socket.destroy()); // after ws's own setTimeout(0)
      client.on('ping', (data) => pings.push(data));
      client.on('pong', (data) => pongs.push(data));
      client.on('message', (data) => client.send(`echo:${Buffer.from(data as Buffer).toString()}`));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  upstream = {
    close: async () => {
      for (const client of wss.clients) client.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, pings, pongs };
}

async function openStream(running: RunningGateway) {
  const token = await running.issuer.mint({ sub: 'alice' });
  const client = new WebSocket(`${running.url.replace('http', 'ws')}/v2/updates`, [
    `jwt.token.${token}`,
    'daml.ws.auth',
  ]);
  const pings: Buffer[] = [];
  const pongs: Buffer[] = [];
  client.on('ping', (data) => pings.push(data));
  client.on('pong', (data) => pongs.push(data));
  const closed = new Promise<number>((resolve) => client.once('close', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    client.once('open', () => resolve());
    client.once('error', reject);
  });
  return { client, pings, pongs, closed };
}

async function streamsEnded(running: RunningGateway): Promise<Record<string, number>> {
  const metric = await running.registry.getSingleMetric(MetricNames.webSocketStreamsEnded)!.get();
  return Object.fromEntries(metric.values.map((v) => [String(v.labels.ended_by), v.value]));
}

describe('WebSocket keep-alive pings (websocket.keepAliveSeconds)', () => {
  it('keep a quiet stream open past the participant idle cut; pings on both legs, no pong forwarded', async () => {
    const participant = await idleCuttingUpstream();
    gw = await startGateway(participant.url, { websocket: { keepAliveSeconds: 1 } });
    const stream = await openStream(gw);
    let closedEarly = false;
    void stream.closed.then(() => (closedEarly = true));

    await sleep(2 * IDLE_CUT_MS); // quiet: no frame of the stream either way
    expect(closedEarly).toBe(false);
    expect(stream.pings.length).toBeGreaterThanOrEqual(3);
    expect(participant.pings.length).toBeGreaterThanOrEqual(3);
    for (const ping of [...stream.pings, ...participant.pings])
      expect(ping.toString()).toMatch(/^ledger-gateway keep-alive /);
    // Each side answered the gateway's pings (ws does, as RFC 6455 requires); none of those pongs got through.
    expect(stream.pongs).toEqual([]);
    expect(participant.pongs).toEqual([]);

    // The stream still carries its frames.
    const echoed = new Promise<string>((resolve) =>
      stream.client.once('message', (data) => resolve(Buffer.from(data as Buffer).toString())),
    );
    stream.client.send('{"beginExclusive":0}');
    expect(await echoed).toBe('echo:{"beginExclusive":0}');
    expect(await streamsEnded(gw)).toEqual({});
    stream.client.close();
  }, 20_000);

  it('without them, the same quiet stream is cut by the participant idle cut', async () => {
    const participant = await idleCuttingUpstream();
    gw = await startGateway(participant.url);
    const stream = await openStream(gw);
    const started = Date.now();
    expect(await stream.closed).toBe(1006);
    expect(Date.now() - started).toBeLessThan(2 * IDLE_CUT_MS);
    expect(stream.pings).toEqual([]);
    expect(participant.pings).toEqual([]);
    await expect.poll(() => streamsEnded(gw!)).toEqual({ participant: 1 });
  }, 20_000);

  it('closes a tunnel whose participant stops answering: keepalive_timeout', async () => {
    // A participant that agrees to the upgrade and then never sends a byte, pong included.
    const server = http.createServer();
    const sockets = new Set<net.Socket>();
    server.on('upgrade', (request, socket: net.Socket) => {
      sockets.add(socket);
      const key = createHash('sha1')
        .update(`${String(request.headers['sec-websocket-key'])}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`)
        .digest('base64');
      socket.write(
        `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${key}\r\nSec-WebSocket-Protocol: daml.ws.auth\r\n\r\n`,
      );
      socket.resume();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    upstream = {
      close: async () => {
        for (const socket of sockets) socket.destroy(); // upgraded: no longer the server's to close
        await new Promise<void>((resolve) => server.close(() => resolve()));
      },
    };
    gw = await startGateway(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, {
      websocket: { keepAliveSeconds: 1 },
    });
    const stream = await openStream(gw);
    expect(await stream.closed).toBe(1006);
    await expect.poll(() => streamsEnded(gw!)).toEqual({ keepalive_timeout: 1 });
  }, 20_000);
});

/** A raw WebSocket peer's bytes: what it sent (its pongs to the gateway apart) and what it received. */
interface RawPeer {
  readonly socket: net.Socket;
  /** Writing a frame in pieces: a pong waits for its end (no frame may start inside another). */
  midFrame: boolean;
  sendPiece(bytes: Buffer, last: boolean): void;
  readonly received: Buffer[];
  /** Every write, and whether it was a pong answering the gateway. */
  readonly sent: Array<{ bytes: Buffer; pong: boolean }>;
  readonly pingsFromGateway: Buffer[];
  readonly pongsReceived: Buffer[];
  /** What its WebSocket reader refused in the bytes it received (a frame cut by another, say). */
  readonly protocolErrors: string[];
  send(bytes: Buffer): void;
}

/** Reads what comes after the handshake, answers the gateway's pings, records everything. */
function rawPeer(socket: net.Socket, isServer: boolean, after: Buffer): RawPeer {
  const waitingPongs: Array<{ bytes: Buffer; pong: boolean }> = [];
  const write = (entry: { bytes: Buffer; pong: boolean }) => {
    if (peer.midFrame) return waitingPongs.push(entry);
    peer.sent.push(entry);
    socket.write(entry.bytes);
  };
  const peer: RawPeer = {
    socket,
    midFrame: false,
    received: [],
    sent: [],
    pingsFromGateway: [],
    pongsReceived: [],
    protocolErrors: [],
    send(bytes) {
      write({ bytes, pong: false });
    },
    sendPiece(bytes, last) {
      peer.sent.push({ bytes, pong: false });
      socket.write(bytes);
      peer.midFrame = !last;
      if (last) for (const entry of waitingPongs.splice(0)) write(entry);
    },
  };
  const receiver = new Receiver({ isServer });
  // Every ping is answered (RFC 6455 §5.5.2); only the pongs to the gateway's should go no further.
  receiver.on('ping', (data) => {
    const gateways = data.toString().startsWith(KEEP_ALIVE);
    if (gateways) peer.pingsFromGateway.push(data);
    write({ bytes: frame(0xa, data, { mask: !isServer }), pong: gateways });
  });
  receiver.on('pong', (data) => peer.pongsReceived.push(data));
  (receiver as unknown as NodeJS.EventEmitter).on('error', (error: Error) => peer.protocolErrors.push(error.message));
  const take = (chunk: Buffer) => {
    peer.received.push(Buffer.from(chunk)); // a copy: ws's reader unmasks a client's frames in place
    receiver.write(chunk);
  };
  if (after.length > 0) take(after);
  socket.on('data', take);
  return peer;
}

/** Splits a byte stream into its frames (RFC 6455 §5.2) and drops the gateway's pings. */
function withoutGatewayPings(stream: Buffer): Buffer {
  const kept: Buffer[] = [];
  let at = 0;
  while (at < stream.length) {
    const second = stream[at + 1]!;
    let length = second & 0x7f;
    let header = 2;
    if (length === 126) [length, header] = [stream.readUInt16BE(at + 2), 4];
    else if (length === 127) [length, header] = [Number(stream.readBigUInt64BE(at + 2)), 10];
    const masked = (second & 0x80) !== 0;
    const end = at + header + (masked ? 4 : 0) + length;
    const payload = Buffer.from(stream.subarray(end - length, end));
    if (masked) for (let i = 0; i < length; i++) payload[i]! ^= stream[at + header + (i % 4)]!;
    const gatewayPing = (stream[at]! & 0x0f) === 0x9 && payload.toString().startsWith(KEEP_ALIVE);
    if (!gatewayPing) kept.push(stream.subarray(at, end));
    at = end;
  }
  return Buffer.concat(kept);
}

const sentBytes = (peer: RawPeer) =>
  Buffer.concat(peer.sent.filter((write) => !write.pong).map((write) => write.bytes));

describe('the stream through a tunnel with keep-alive pings', () => {
  it("passes every frame byte for byte both ways, pings only between frames, and each side's own pongs", async () => {
    let participant: RawPeer | undefined;
    const server = http.createServer();
    server.on('upgrade', (request, socket: net.Socket, head: Buffer) => {
      const key = createHash('sha1')
        .update(`${String(request.headers['sec-websocket-key'])}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`)
        .digest('base64');
      socket.write(
        `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${key}\r\nSec-WebSocket-Protocol: daml.ws.auth\r\n\r\n`,
      );
      participant = rawPeer(socket, true, head);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    upstream = {
      close: async () => {
        participant?.socket.destroy();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      },
    };
    gw = await startGateway(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, {
      websocket: { keepAliveSeconds: 1 },
    });
    const token = await gw.issuer.mint({ sub: 'alice' });
    const { hostname, port } = new URL(gw.url);
    const socket = net.connect(Number(port), hostname);
    socket.write(
      `GET /v2/updates HTTP/1.1\r\nHost: ${hostname}:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        `Sec-WebSocket-Key: ${Buffer.alloc(16, 5).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n` +
        `Sec-WebSocket-Protocol: jwt.token.${token}, daml.ws.auth\r\n\r\n`,
    );
    const afterHead = await new Promise<Buffer>((resolve) => {
      let text = Buffer.alloc(0);
      const onData = (chunk: Buffer) => {
        text = Buffer.concat([text, chunk]);
        const end = text.indexOf('\r\n\r\n');
        if (end === -1) return;
        socket.off('data', onData);
        expect(text.subarray(0, 12).toString()).toBe('HTTP/1.1 101');
        resolve(text.subarray(end + 4));
      };
      socket.on('data', onData);
    });
    const client = rawPeer(socket, false, afterHead);
    await expect.poll(() => participant).toBeDefined();

    // Both ways: small frames, a fragmented message with a ping of the sender's own between its
    // fragments, and a long frame written in pieces across the keep-alive ticks.
    const long = (mask: boolean) => frame(2, Buffer.alloc(200_000, mask ? 1 : 2), { mask });
    for (const [peer, mask] of [
      [client, true],
      [participant!, false],
    ] as const) {
      peer.send(frame(1, Buffer.from('{"beginExclusive":0}'), { mask }));
      peer.send(frame(1, Buffer.alloc(300, 3), { fin: false, mask }));
      peer.send(frame(9, Buffer.from(mask ? 'client ping' : 'participant ping'), { mask }));
      peer.send(frame(0, Buffer.alloc(100, 4), { mask }));
    }
    const [fromClient, fromParticipant] = [long(true), long(false)];
    const cuts = [0, 3, 70_000, 150_000, fromClient.length]; // the first piece ends inside the header
    for (let i = 1; i < cuts.length; i++) {
      await sleep(700);
      client.sendPiece(fromClient.subarray(cuts[i - 1], cuts[i]), i === cuts.length - 1);
      participant!.sendPiece(fromParticipant.subarray(cuts[i - 1], cuts[i]), i === cuts.length - 1);
    }
    await sleep(1_500); // quiet, for the last pings
    expect(client.protocolErrors).toEqual([]);
    expect(participant!.protocolErrors).toEqual([]);
    const expectedAtParticipant = sentBytes(client);
    const expectedAtClient = sentBytes(participant!);
    await expect
      .poll(() => withoutGatewayPings(Buffer.concat(participant!.received)).length)
      .toBe(expectedAtParticipant.length);
    await expect.poll(() => withoutGatewayPings(Buffer.concat(client.received)).length).toBe(expectedAtClient.length);

    expect(withoutGatewayPings(Buffer.concat(participant!.received)).equals(expectedAtParticipant)).toBe(true);
    expect(withoutGatewayPings(Buffer.concat(client.received)).equals(expectedAtClient)).toBe(true);
    expect(client.pingsFromGateway.length).toBeGreaterThanOrEqual(2);
    expect(participant!.pingsFromGateway.length).toBeGreaterThanOrEqual(2);
    // Each side got the pong to its own ping, and none of the pongs to the gateway's.
    expect(client.pongsReceived.map(String)).toEqual(['client ping']);
    expect(participant!.pongsReceived.map(String)).toEqual(['participant ping']);
    socket.destroy();
  }, 30_000);
});
