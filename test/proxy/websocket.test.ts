// WebSocket streams: the upgrade reaches the participant with every subprotocol, frames flow both ways.
import http from 'node:http';
import net from 'node:net';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { AuthFailure } from '../../src/auth/failure.js';
import { webSocketToken } from '../../src/auth/extract.js';
import { subprotocolElements } from '../../src/exchange/subprotocols.js';
import { forwardedSubprotocols } from '../../src/proxy/websocket.js';
import { cantonToken } from '../auth/support/canton-websocket.js';
import { gauge, startGateway, type RunningGateway } from '../helpers/gateway.js';
import { logCapture } from '../helpers/log-capture.js';

let gw: RunningGateway | undefined;
let upstream:
  | { server: http.Server; wss: WebSocketServer; url: string; upgrades: http.IncomingHttpHeaders[]; paths: string[] }
  | undefined;

afterEach(async () => {
  await gw?.close();
  if (upstream) {
    for (const client of upstream.wss.clients) client.terminate();
    upstream.wss.close();
    upstream.server.closeAllConnections();
    await new Promise((resolve) => upstream!.server.close(resolve));
  }
  gw = undefined;
  upstream = undefined;
});

/** A participant-like WebSocket endpoint: answers `daml.ws.auth`, echoes each frame twice. */
async function startWebSocketUpstream(refuseWith?: number) {
  const upgrades: http.IncomingHttpHeaders[] = [];
  const paths: string[] = [];
  const server = http.createServer((_request, response) => response.end('{"version":"3.5.10"}'));
  const wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (protocols) => (protocols.has('daml.ws.auth') ? 'daml.ws.auth' : false),
  });
  server.on('upgrade', (request, socket, head) => {
    upgrades.push(request.headers);
    paths.push(request.url ?? '');
    if (refuseWith !== undefined) {
      const body = JSON.stringify({
        code: 'NA',
        cause: 'A security-sensitive error has been received',
        grpcCodeValue: 16,
      });
      socket.end(
        `HTTP/1.1 ${refuseWith} Unauthorized\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      );
      return;
    }
    wss.handleUpgrade(request, socket, head, (ws) => {
      ws.on('message', (data) => {
        ws.send(`echo:${Buffer.from(data as Buffer).toString()}`);
        ws.send(`again:${Buffer.from(data as Buffer).toString()}`);
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  upstream = { server, wss, url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, upgrades, paths };
  return upstream;
}

function open(
  url: string,
  protocols: string[],
  headers: Record<string, string>,
): Promise<{ ws: WebSocket; protocol: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols, { headers });
    ws.once('open', () => resolve({ ws, protocol: ws.protocol }));
    ws.once('unexpected-response', (_request, response) =>
      reject(Object.assign(new Error(`status ${response.statusCode}`), { status: response.statusCode })),
    );
    ws.once('error', reject);
  });
}

function rawUpgrade(base: string, path: string, authorization: string, extra: string[] = []): Promise<string> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () =>
      socket.write(
        [
          `GET ${path} HTTP/1.1`,
          'Host: gw',
          'Connection: Upgrade',
          'Upgrade: websocket',
          'Sec-WebSocket-Version: 13',
          'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
          `Authorization: ${authorization}`,
          ...extra,
          '',
          '',
        ].join('\r\n'),
      ),
    );
    let text = '';
    socket.on('data', (data) => {
      text += data.toString();
    });
    socket.on('close', () => resolve(text));
    socket.on('error', reject);
  });
}

describe('forwardedSubprotocols', () => {
  it("sends the offer as one line of the client's elements, in its order, without spaces", () => {
    expect(forwardedSubprotocols(['Sec-WebSocket-Protocol', 'daml.ws.auth, jwt.token.a.b.c'])).toBe(
      'daml.ws.auth,jwt.token.a.b.c',
    );
    const twoLines = ['sec-websocket-protocol', ' b ,\ta', 'Host', 'x', 'Sec-WebSocket-Protocol', ', c,'];
    expect(forwardedSubprotocols(twoLines)).toBe('b,a,c');
    expect(forwardedSubprotocols(['Sec-WebSocket-Protocol', ' , '])).toBeUndefined();
    expect(forwardedSubprotocols(['Host', 'x'])).toBeUndefined();
  });

  it('makes a participant that trims and one that does not read the token the gateway read, for any offer', () => {
    const element = fc.constantFrom('daml.ws.auth', 'jwt.token.A', 'jwt.token.B', 'jwt.token.', 'x.jwt.token.C', '');
    const space = fc.constantFrom('', ' ', '  ', '\t', ' \t');
    const spaced = fc.tuple(space, element, space).map(([before, name, after]) => before + name + after);
    const offer = fc.array(spaced, { minLength: 1, maxLength: 6 }).map((elements) => elements.join(','));
    fc.assert(
      fc.property(offer, (value) => {
        const headers = ['Sec-WebSocket-Protocol', value];
        let read: string | undefined;
        try {
          read = webSocketToken(headers).token;
        } catch (error) {
          if (!(error instanceof AuthFailure)) throw error;
          read = error.reason === 'missing' ? undefined : ''; // malformed: the first jwt.token. element is empty
        }
        const forwarded = forwardedSubprotocols(headers);
        expect(forwarded?.split(',') ?? []).toEqual(subprotocolElements(value));
        expect(forwarded === undefined ? undefined : cantonToken(forwarded, 'split')).toBe(read);
        expect(forwarded === undefined ? undefined : cantonToken(forwarded, 'trimmed')).toBe(read);
      }),
      { numRuns: 500 },
    );
  });
});

describe('websocket forwarding', () => {
  it('keeps every offered subprotocol and passes frames both ways', async () => {
    const participant = await startWebSocketUpstream();
    gw = await startGateway(participant.url);
    const token = gw.auth().authorization?.slice('Bearer '.length) ?? 'e30.e30.sig';
    const { ws, protocol } = await open(
      `${gw.url.replace('http', 'ws')}/v2/updates?x=%2F1`,
      [`jwt.token.${token}`, 'daml.ws.auth'],
      {},
    );
    expect(protocol).toBe('daml.ws.auth');
    const offered = String(participant.upgrades[0]!['sec-websocket-protocol'])
      .split(',')
      .map((p) => p.trim());
    expect(offered).toEqual([`jwt.token.${token}`, 'daml.ws.auth']);
    expect(participant.paths[0]).toBe('/v2/updates?x=%2F1');
    const received: string[] = [];
    const two = new Promise<void>((resolve) =>
      ws.on('message', (data) => {
        received.push(Buffer.from(data as Buffer).toString());
        if (received.length === 2) resolve();
      }),
    );
    ws.send('{"beginExclusive":0}');
    await two;
    expect(received).toEqual(['echo:{"beginExclusive":0}', 'again:{"beginExclusive":0}']);
    ws.close();
  });

  it("passes the participant's refusal of an upgrade back whole", async () => {
    const participant = await startWebSocketUpstream(401);
    gw = await startGateway(participant.url);
    const token = gw.auth().authorization?.slice('Bearer '.length) ?? 'e30.e30.sig';
    await expect(
      open(`${gw.url.replace('http', 'ws')}/v2/state/active-contracts`, [`jwt.token.${token}`, 'daml.ws.auth'], {}),
    ).rejects.toMatchObject({ status: 401 });
    expect(participant.upgrades).toHaveLength(1);
  });

  it("answers 503 in Canton's shape when the participant is unreachable", async () => {
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    gw = await startGateway(`http://127.0.0.1:${port}`);
    const token = gw.auth().authorization?.slice('Bearer '.length) ?? 'e30.e30.sig';
    await expect(
      open(`${gw.url.replace('http', 'ws')}/v2/updates`, [`jwt.token.${token}`, 'daml.ws.auth'], {}),
    ).rejects.toMatchObject({ status: 503 });
  });

  it("bounds the participant's answer to an upgrade by the channel's own timeout when it has one", async () => {
    // A participant that takes upgrades and never answers them.
    const silent = http.createServer();
    const held: net.Socket[] = [];
    silent.on('upgrade', (_request, socket: net.Socket) => held.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
      gw = await startGateway(url, { upstream: { timeoutMs: 60_000, operationTimeoutsMs: { onV2Updates: 1_000 } } });
      const token = gw.auth().authorization!.slice('Bearer '.length);
      const started = Date.now();
      await expect(
        open(`${gw.url.replace('http', 'ws')}/v2/updates`, [`jwt.token.${token}`, 'daml.ws.auth'], {}),
      ).rejects.toMatchObject({ status: 504 });
      expect(Date.now() - started).toBeLessThan(5_000); // the override (1 s), not timeoutMs (60 s)
      expect(held).toHaveLength(1);
    } finally {
      for (const socket of held) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it('refuses an upgrade outside /v2 and a dot-segment path without reaching the participant', async () => {
    const participant = await startWebSocketUpstream();
    gw = await startGateway(participant.url);
    await expect(open(`${gw.url.replace('http', 'ws')}/livez`, ['daml.ws.auth'], gw.auth())).rejects.toMatchObject({
      status: 404,
    });
    // A WHATWG URL would resolve the dot segment before sending: write the upgrade by hand.
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const answer = await rawUpgrade(gw.url, '/v2/%2e%2e/updates', gw.auth().authorization!, [
      `traceparent: 00-${traceId}-00f067aa0ba902b7-01`,
    ]);
    expect(answer).toMatch(/^HTTP\/1.1 400 /);
    expect(answer).toContain('"code":"GATEWAY_INVALID_PATH"');
    expect(answer).toContain(`"traceId":"${traceId}"`);
    expect(participant.upgrades).toHaveLength(0);
  });

  it('counts upgrades in the request metric by channel', async () => {
    const participant = await startWebSocketUpstream();
    gw = await startGateway(participant.url);
    const token = gw.auth().authorization?.slice('Bearer '.length) ?? 'e30.e30.sig';
    const { ws } = await open(
      `${gw.url.replace('http', 'ws')}/v2/updates/flats`,
      [`jwt.token.${token}`, 'daml.ws.auth'],
      {},
    );
    ws.close();
    const metrics = await gw.registry.getSingleMetricAsString('ledger_gateway_requests_total');
    expect(metrics).toMatch(/operation="onV2UpdatesFlats",method="GET",status="101",error_code="none"/);
  });

  it("gauges the open streams, and logs each stream's end with its duration and the side that closed first", async () => {
    const participant = await startWebSocketUpstream();
    const log = logCapture();
    // The request line written at the 101 (with the access log, a stream's line is written at its end).
    gw = await startGateway(participant.url, { log: { access: { enabled: false } } }, { logger: log.logger });
    const url = `${gw.url.replace('http', 'ws')}/v2/updates`;
    const first = await open(url, ['daml.ws.auth'], gw.auth());
    const second = await open(url, ['daml.ws.auth'], gw.auth());
    expect(await gauge(gw, 'ledger_gateway_websocket_streams_open')).toBe(2);
    await new Promise((resolve) => setTimeout(resolve, 300));
    first.ws.terminate(); // the client drops this one's connection
    await expect.poll(() => gauge(gw!, 'ledger_gateway_websocket_streams_open'), { timeout: 3_000 }).toBe(1);
    await expect.poll(() => participant.wss.clients.size, { timeout: 3_000 }).toBe(1);
    for (const client of participant.wss.clients) client.terminate(); // the participant ends the other
    await expect.poll(() => gauge(gw!, 'ledger_gateway_websocket_streams_open'), { timeout: 3_000 }).toBe(0);
    second.ws.terminate();
    const ended = log.entries().filter((entry) => entry.msg === 'stream ended');
    expect(ended).toHaveLength(2);
    expect(ended.map((entry) => entry.closedFirst).sort()).toEqual(['client', 'participant']);
    expect(ended.map((entry) => entry.reason).sort()).toEqual(['client', 'participant']);
    const counted = await gw.registry.getSingleMetricAsString('ledger_gateway_websocket_streams_ended_total');
    expect(counted).toContain('{operation="onV2Updates",ended_by="client"} 1');
    expect(counted).toContain('{operation="onV2Updates",ended_by="participant"} 1');
    for (const entry of ended) {
      expect(entry).toMatchObject({ operation: 'onV2Updates' });
      expect(entry.durationMs as number).toBeGreaterThanOrEqual(250);
      // The same id as the stream's request line.
      expect(
        log.entries().some((line) => line.msg === 'request' && line.reqId === entry.reqId && line.status === 101),
      ).toBe(true);
    }
  });

  it('closes a tunnel with no byte either way for websocket.idleTimeoutMs, both sides; logs, counts why', async () => {
    const idleTimeoutMs = 1_000;
    const participant = await startWebSocketUpstream();
    const log = logCapture();
    gw = await startGateway(participant.url, { websocket: { idleTimeoutMs } }, { logger: log.logger });
    const { ws } = await open(`${gw.url.replace('http', 'ws')}/v2/updates`, ['daml.ws.auth'], gw.auth());
    const [served] = participant.wss.clients;
    served!.removeAllListeners('message'); // from here on the participant answers nothing
    const participantClosed = new Promise<void>((resolve) => served!.once('close', () => resolve()));
    const clientClosed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    // Frames one way only keep it open, either way: the participant's (an update stream), then the client's.
    let lastSent = 0;
    const sendFor = async (send: () => void, ms: number) => {
      const timer = setInterval(() => {
        send();
        lastSent = Date.now();
      }, 100);
      await new Promise((resolve) => setTimeout(resolve, ms));
      clearInterval(timer);
    };
    await sendFor(() => served!.send('{"update":{}}'), 1_500);
    await sendFor(() => ws.send('{}'), 1_500);
    expect(ws.readyState).toBe(WebSocket.OPEN);
    const stillOpen = new Promise<string>((resolve) => setTimeout(resolve, 8_000, 'still open after 8 s').unref());
    expect(await Promise.race([clientClosed, stillOpen])).toBe(1006); // closed without a close frame
    await participantClosed;
    // Not before the timeout counted from the last frame (which the gateway moved after it was sent).
    expect(Date.now() - lastSent).toBeGreaterThanOrEqual(idleTimeoutMs - 5);
    expect(Date.now() - lastSent).toBeLessThan(idleTimeoutMs + 5_000);
    await expect.poll(() => gauge(gw!, 'ledger_gateway_websocket_streams_open'), { timeout: 3_000 }).toBe(0);
    const ended = log.entries().filter((entry) => entry.msg === 'stream ended');
    expect(ended).toEqual([
      expect.objectContaining({ operation: 'onV2Updates', reason: 'idle_timeout', closedFirst: 'gateway' }),
    ]);
    expect(ended[0]!.durationMs as number).toBeGreaterThanOrEqual(3_000 + idleTimeoutMs - 300);
    expect(await gw.registry.getSingleMetricAsString('ledger_gateway_websocket_streams_ended_total')).toContain(
      '{operation="onV2Updates",ended_by="idle_timeout"} 1',
    );
  });
});
