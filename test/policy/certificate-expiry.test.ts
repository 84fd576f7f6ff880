// A client certificate that expires while its identity lives on (issue 40): on a kept-alive
// connection, and in a TLS session a client resumes, which skips the certificate check a full
// handshake makes. Source rules judge the certificate's validity at each call, and the listener
// resumes no session when it asks for client certificates (unless server.tls.resumeSessions).
import { readFileSync } from 'node:fs';
import { connect, type TLSSocket } from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { createClientCa, type ClientCertificate } from '../helpers/short-lived-certificates.js';

const fixture = (name: string) => new URL(`../proxy/fixtures/${name}`, import.meta.url).pathname;
const SERVER_CA = readFileSync(fixture('test-ca.pem'));
const listenerTls = { certFile: fixture('test-participant.pem'), keyFile: fixture('test-only-participant-key.pem') };
const PARTIES = '/v2/parties';
/** X.509 validity is written in whole seconds: the margin past notAfter before a test looks. */
const PAST_EXPIRY_MS = 1_500;

let upstream: RecordingUpstream | undefined;
let gw: RunningGateway | undefined;
const sockets: TLSSocket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await gw?.close();
  await upstream?.close();
  gw = upstream = undefined;
});

interface Connection {
  /** One GET on this connection: its status, or 0 when the connection was closed without an answer. */
  get(path: string): Promise<number>;
  readonly reused: boolean;
  /** The session the server gave (TLS 1.3: a ticket after the handshake), for a later resumption. */
  session(): Promise<Buffer>;
}

/** A kept-alive TLS connection presenting `client`, resuming `session` when given. */
function open(client: ClientCertificate, session?: Buffer): Promise<Connection> {
  return new Promise((resolve, reject) => {
    const url = new URL(gw!.url);
    const socket = connect({
      host: url.hostname,
      port: Number(url.port),
      ca: SERVER_CA,
      cert: client.cert,
      key: client.key,
      servername: 'localhost',
      checkServerIdentity: () => undefined,
      ...(session !== undefined && { session }),
    });
    sockets.push(socket);
    const ticket = new Promise<Buffer>((resolveTicket) => socket.once('session', resolveTicket));
    let received = '';
    let waiting: ((status: number) => void) | undefined;
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      const head = /^HTTP\/1\.1 (\d{3})[^]*?\r\n\r\n/.exec(received);
      const length = head === null ? undefined : Number(/content-length: (\d+)/i.exec(head[0])?.[1] ?? 0);
      if (head === null || received.length < head[0].length + length!) return;
      received = received.slice(head[0].length + length!);
      waiting?.(Number(head[1]));
    });
    socket.on('close', () => waiting?.(0));
    socket.once('error', reject);
    socket.once('secureConnect', () => {
      socket.off('error', reject);
      socket.on('error', () => undefined);
      resolve({
        reused: socket.isSessionReused(),
        session: () => ticket,
        get: (path) =>
          new Promise((answered) => {
            waiting = answered;
            const headers = { host: 'localhost', ...gw!.auth() } as Record<string, string>;
            const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
            socket.write(`GET ${path} HTTP/1.1\r\n${lines.join('')}\r\n`);
          }),
      });
    });
  });
}

async function gatewayRequiring(commonName: string, caFile: string, tls: Record<string, unknown> = {}) {
  upstream = await startRecordingUpstream();
  gw = await startGateway(upstream.url, {
    server: { tls: { ...listenerTls, clientCaFile: caFile, clientCertificate: 'require', ...tls } },
    policy: { sources: [{ operations: ['getV2Parties'], clientCertificate: { subjects: [`CN=${commonName}`] } }] },
  });
}

const until = (time: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, time - Date.now())));

describe('a client certificate past its notAfter', () => {
  it('is refused on a connection opened while it was valid, and its TLS session is not resumed', async () => {
    const ca = createClientCa();
    const notAfter = new Date(Math.ceil((Date.now() + 3_000) / 1000) * 1000);
    const client = ca.issue('expiring-client', notAfter);
    await gatewayRequiring('expiring-client', ca.caFile);

    const first = await open(client);
    expect(await first.get(PARTIES)).toBe(200);
    const session = await first.session();
    // Resumption is off while the listener asks for client certificates: a full handshake each time.
    const second = await open(client, session);
    expect(second.reused).toBe(false);
    expect(await second.get(PARTIES)).toBe(200);
    await until(notAfter.getTime() + PAST_EXPIRY_MS);

    // The same connection: the certificate is judged at each call, not once at the handshake.
    expect(await first.get(PARTIES)).toBe(403);
    // A new connection offering the session: a full handshake, whose certificate check fails.
    const resumed = await open(client, session).catch(() => undefined);
    if (resumed !== undefined) {
      expect(resumed.reused).toBe(false);
      expect([0, 403]).toContain(await resumed.get(PARTIES));
    }
    expect(upstream!.requests.map((request) => request.url)).toEqual([PARTIES, PARTIES]);
  }, 20_000);

  it('with server.tls.resumeSessions on, a resumed session still cannot use the expired certificate', async () => {
    const ca = createClientCa();
    const notAfter = new Date(Math.ceil((Date.now() + 3_000) / 1000) * 1000);
    const client = ca.issue('expiring-client', notAfter);
    await gatewayRequiring('expiring-client', ca.caFile, { resumeSessions: true });

    const first = await open(client);
    expect(await first.get(PARTIES)).toBe(200);
    const session = await first.session();
    const again = await open(client, session);
    expect(again.reused).toBe(true); // the switch works: sessions are resumed
    expect(await again.get(PARTIES)).toBe(200);
    await until(notAfter.getTime() + PAST_EXPIRY_MS);

    const resumed = await open(client, session);
    expect(resumed.reused).toBe(true);
    expect(await resumed.get(PARTIES)).toBe(403);
    expect(upstream!.requests.map((request) => request.url)).toEqual([PARTIES, PARTIES]);
  }, 20_000);
});
