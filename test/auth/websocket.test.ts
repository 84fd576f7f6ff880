// WebSocket upgrades: the token comes from the `jwt.token.` subprotocol (or Authorization); a good
// one reaches the participant with every subprotocol offered, a bad one never reaches it.
import http from 'node:http';
import net from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import { WebSocket as BrowserWebSocket } from 'undici';
import WebSocket from 'ws';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { startWebSocketUpstream, type WebSocketUpstream } from '../helpers/websocket-upstream.js';
import {
  startCantonWebSocketUpstream,
  type CantonReading,
  type CantonWebSocketUpstream,
} from './support/canton-websocket.js';
import { sign, signingKey, tamperedPayload, type SigningKey } from './support/keys.js';
import { closeAfterEach } from '../helpers/per-test.js';

const ISSUER = 'https://idp.example.com';

type Outcome =
  | { opened: true; protocol: string; echo: string }
  | { opened: false; status: number; headers: http.IncomingHttpHeaders; body: string };

function connect(url: string, protocols: string[], headers: Record<string, string> = {}): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, protocols, { headers });
    socket.once('open', () => {
      socket.once('message', (data) => {
        resolve({ opened: true, protocol: socket.protocol, echo: Buffer.from(data as Buffer).toString() });
        socket.close();
      });
      socket.send('{"filter":{}}');
    });
    socket.once('unexpected-response', (_request, response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () =>
        resolve({
          opened: false,
          status: response.statusCode ?? 0,
          headers: response.headers,
          body: Buffer.concat(chunks).toString(),
        }),
      );
    });
    socket.once('error', (error) => reject(error));
  });
}

let key: SigningKey;
beforeAll(async () => {
  key = await signingKey('ES256');
});

let upstream: WebSocketUpstream | undefined;
let canton: CantonWebSocketUpstream | undefined;
let gw: RunningGateway | undefined;
closeAfterEach(
  () => gw,
  () => upstream,
  () => canton,
);

async function gatewayTo(upstreamUrl: string): Promise<string> {
  const auth = { issuers: [{ issuer: ISSUER, jwks: { keys: [key.publicJwk] } }], participantId: 'participant1' };
  gw = await startGateway(upstreamUrl, { auth });
  return `${gw.url.replace(/^http/, 'ws')}/v2/updates`;
}

async function setUp(): Promise<string> {
  upstream = await startWebSocketUpstream();
  return gatewayTo(upstream.url);
}

/**
 * A browser's WebSocket (undici's is the WHATWG one): it offers its subprotocols as `a, b`, and fails
 * the connection when the answer names a subprotocol it did not offer (RFC 6455 §4.1). Sends one
 * frame and resolves with the answer's subprotocol and the first frame back.
 */
function browserOnce(url: string, protocols: string[]): Promise<{ protocol: string; frame: string }> {
  return new Promise((resolve, reject) => {
    const socket = new BrowserWebSocket(url, protocols);
    socket.addEventListener('open', () => socket.send('{"filter":{}}'));
    socket.addEventListener('message', (event) => {
      resolve({ protocol: socket.protocol, frame: String(event.data) });
      socket.close();
    });
    socket.addEventListener('error', () => reject(new Error('the WebSocket connection failed')));
  });
}

/** Writes an upgrade by hand and resolves with the status of the answer (the connection is then dropped). */
function rawUpgradeStatus(url: string, headerLines: string[]): Promise<number> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), '127.0.0.1', () =>
      socket.write(
        [
          'GET /v2/updates HTTP/1.1',
          'Host: gw',
          'Upgrade: websocket',
          'Connection: Upgrade',
          'Sec-WebSocket-Version: 13',
          'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
          ...headerLines,
          '',
          '',
        ].join('\r\n'),
      ),
    );
    let text = '';
    socket.on('data', (data: Buffer) => {
      text += data.toString('latin1');
      if (!text.includes('\r\n\r\n')) return;
      resolve(Number(text.slice(9, 12)));
      socket.destroy();
    });
    socket.on('error', reject);
  });
}

describe('WebSocket upgrades', () => {
  it('tunnels an upgrade whose jwt.token. subprotocol verifies, with both subprotocols', async () => {
    const url = await setUp();
    const token = await sign(key, { iss: ISSUER });
    const outcome = await connect(url, [`jwt.token.${token}`, 'daml.ws.auth']);
    expect(outcome).toEqual({ opened: true, protocol: 'daml.ws.auth', echo: 'echo:{"filter":{}}' });
    expect(upstream!.upgrades).toHaveLength(1);
    expect(upstream!.upgrades[0]!['sec-websocket-protocol']).toBe(`jwt.token.${token},daml.ws.auth`);
  });

  it('uses the first of several jwt.token. subprotocols, the one the participant reads (Canton Endpoints.scala)', async () => {
    const url = await setUp();
    const good = await sign(key, { iss: ISSUER });
    const forged = tamperedPayload(good, { sub: 'participant_admin' });
    // ws offers the subprotocols joined by "," without spaces.
    const opened = await connect(url, [`jwt.token.${good}`, `jwt.token.${forged}`, 'daml.ws.auth']);
    expect(opened).toEqual({ opened: true, protocol: 'daml.ws.auth', echo: 'echo:{"filter":{}}' });
    expect(upstream!.upgrades[0]!['sec-websocket-protocol']).toBe(`jwt.token.${good},jwt.token.${forged},daml.ws.auth`);
    // The other way round the participant would read the forged token: refused, never forwarded.
    const refused = await connect(url, [`jwt.token.${forged}`, `jwt.token.${good}`, 'daml.ws.auth']);
    expect(refused).toMatchObject({
      opened: false,
      status: 401,
      headers: { 'www-authenticate': 'Bearer error="invalid_token"' },
    });
    expect(upstream!.upgrades).toHaveLength(1);
  });

  it('takes the token from the Authorization header too', async () => {
    const url = await setUp();
    const token = await sign(key, { iss: ISSUER });
    const outcome = await connect(url, ['daml.ws.auth'], { Authorization: `Bearer ${token}` });
    expect(outcome).toMatchObject({ opened: true, protocol: 'daml.ws.auth' });
    expect(upstream!.upgrades[0]!.authorization).toBe(`Bearer ${token}`);
  });

  it.each([
    [
      'a tampered token',
      async () => [
        `jwt.token.${tamperedPayload(await sign(key, { iss: ISSUER }), { sub: 'participant_admin' })}`,
        'daml.ws.auth',
      ],
      'Bearer error="invalid_token"',
    ],
    [
      'an expired token',
      async () => [
        `jwt.token.${await sign(key, { iss: ISSUER, exp: Math.floor(Date.now() / 1000) - 60 })}`,
        'daml.ws.auth',
      ],
      'Bearer error="invalid_token"',
    ],
    ['no token', async () => ['daml.ws.auth'], 'Bearer'],
  ])('refuses %s with 401 before the participant sees the upgrade', async (_name, protocols, challenge) => {
    const url = await setUp();
    const outcome = await connect(url, await protocols());
    expect(outcome.opened).toBe(false);
    if (outcome.opened) return;
    expect(outcome.status).toBe(401);
    expect(outcome.headers['www-authenticate']).toBe(challenge);
    expect(JSON.parse(outcome.body)).toMatchObject({ code: 'NA', errorCategory: -1, grpcCodeValue: 16 });
    expect(upstream!.upgrades).toEqual([]);
  });

  it("refuses an upgrade whose Connection header names the credential's field: the participant would read another token", async () => {
    // A proxy drops the fields Connection names (RFC 9110 §7.6.1): without the Authorization header
    // the gateway verified, the participant would read the jwt.token. subprotocol, never checked.
    const url = await setUp();
    const verified = await sign(key, { iss: ISSUER });
    const forged = tamperedPayload(verified, { sub: 'participant_admin' });
    const port = Number(new URL(url).port);
    const raw = (head: string) =>
      new Promise<string>((resolve) => {
        const socket = net.connect(port, '127.0.0.1', () => socket.write(head));
        let text = '';
        socket.on('data', (data: Buffer) => {
          text += data.toString('latin1');
        });
        socket.on('error', () => undefined);
        socket.on('close', () => resolve(text));
        setTimeout(() => socket.destroy(), 3_000);
      });
    const upgrade = (connection: string, extra: string) =>
      `GET /v2/updates HTTP/1.1\r\nHost: gw\r\nUpgrade: websocket\r\nConnection: ${connection}\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`;
    for (const [connection, extra] of [
      [
        'Upgrade, Authorization',
        `Authorization: Bearer ${verified}\r\nSec-WebSocket-Protocol: jwt.token.${forged},daml.ws.auth\r\n`,
      ],
      ['upgrade,AUTHORIZATION', `Authorization: Bearer ${verified}\r\nSec-WebSocket-Protocol: daml.ws.auth\r\n`],
      ['Upgrade, Sec-WebSocket-Protocol', `Sec-WebSocket-Protocol: jwt.token.${verified},daml.ws.auth\r\n`],
      ['Upgrade, sec-websocket-protocol', `Sec-WebSocket-Protocol: daml.ws.auth, jwt.token.${verified}\r\n`],
    ]) {
      const answer = await raw(upgrade(connection!, extra!));
      expect(answer, connection).toMatch(/^HTTP\/1\.1 400 /);
      expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)), connection).toMatchObject({
        code: 'GATEWAY_MALFORMED_REQUEST',
        cause: expect.stringContaining('the Connection header names'),
      });
    }
    expect(upstream!.upgrades).toHaveLength(0);
    // The same Authorization with a plain Connection header is tunnelled, and reaches the participant.
    const opened = await connect(url, [`jwt.token.${forged}`, 'daml.ws.auth'], { Authorization: `Bearer ${verified}` });
    expect(opened).toMatchObject({ opened: true, protocol: 'daml.ws.auth' });
    expect(upstream!.upgrades[0]!.authorization).toBe(`Bearer ${verified}`);
  });

  it.each(['split', 'trimmed'] as CantonReading[])(
    "lets a browser's `daml.ws.auth, jwt.token.<JWT>` through; a participant reading it the %s way finds the token",
    async (reading) => {
      canton = await startCantonWebSocketUpstream(reading);
      const token = await sign(key, { iss: ISSUER });
      const protocols = ['daml.ws.auth', `jwt.token.${token}`];
      const url = await gatewayTo(canton.url);
      const { protocol, frame } = await browserOnce(url, protocols);
      expect(frame).toBe(`token:${token}`);
      // The answer names a subprotocol the client offered (the browser client fails the connection otherwise).
      expect(protocol).toBe('daml.ws.auth');
      expect(protocols).toContain(protocol);
      // One line, the client's elements in its order, no spaces.
      expect(canton.upgrades).toEqual([{ lines: [`daml.ws.auth,jwt.token.${token}`], token }]);
    },
  );

  it('is needed: sent straight to a participant that does not trim, the same offer loses its token', async () => {
    canton = await startCantonWebSocketUpstream('split');
    const token = await sign(key, { iss: ISSUER });
    const direct = `${canton.url.replace(/^http/, 'ws')}/v2/updates`;
    const { frame } = await browserOnce(direct, ['daml.ws.auth', `jwt.token.${token}`]);
    expect(JSON.parse(frame)).toMatchObject({ code: 'NA', grpcCodeValue: 16 });
    expect(canton.upgrades).toEqual([{ lines: [`daml.ws.auth, jwt.token.${token}`], token: undefined }]);
  });

  it.each(['split', 'trimmed'] as CantonReading[])(
    'forwards the offer so that a participant reading it the %s way reads the token the gateway verified, no later one',
    async (reading) => {
      canton = await startCantonWebSocketUpstream(reading);
      const url = await gatewayTo(canton.url);
      const good = await sign(key, { iss: ISSUER });
      const forged = tamperedPayload(good, { sub: 'participant_admin' });
      // Read as sent, a participant that does not trim would take the forged token here.
      const offer = (value: string) => rawUpgradeStatus(url, [`Sec-WebSocket-Protocol: ${value}`]);
      expect(await offer(`daml.ws.auth, jwt.token.${good},jwt.token.${forged}`)).toBe(101);
      // Tabs and repeated separators; and an offer on two lines, forwarded as one.
      expect(await offer(`daml.ws.auth ,\t jwt.token.${good} ,, jwt.token.${forged}`)).toBe(101);
      const twoLines = ['Sec-WebSocket-Protocol: daml.ws.auth', `Sec-WebSocket-Protocol: jwt.token.${good}`];
      expect(await rawUpgradeStatus(url, twoLines)).toBe(101);
      expect(canton.upgrades.map((upgrade) => upgrade.token)).toEqual([good, good, good]);
      expect(canton.upgrades.map((upgrade) => upgrade.lines)).toEqual([
        [`daml.ws.auth,jwt.token.${good},jwt.token.${forged}`],
        [`daml.ws.auth,jwt.token.${good},jwt.token.${forged}`],
        [`daml.ws.auth,jwt.token.${good}`],
      ]);
      // The forged token first, after ", ": the gateway reads it, refuses it, and the participant never sees it.
      expect(await offer(`daml.ws.auth, jwt.token.${forged},jwt.token.${good}`)).toBe(401);
      expect(canton.upgrades).toHaveLength(3);
    },
  );
});
