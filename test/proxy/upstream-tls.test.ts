// An https participant: its certificate is always verified (a trap of @fastify/reply-from, whose
// verification is off unless set), upstream.tls adds a CA, a name to verify and a client
// certificate, for plain calls, the version cache, the readiness probe and WebSocket upgrades alike.
// Certificates: test/proxy/fixtures (a test CA valid for 100 years; its key was not kept).
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { startWebSocketUpstream } from '../helpers/websocket-upstream.js';

const fixture = (name: string) => new URL(`./fixtures/${name}`, import.meta.url).pathname;
const read = (name: string) => readFileSync(fixture(name));
const CA = fixture('test-ca.pem');

interface TlsParticipant {
  readonly url: string;
  /** Paths asked, with the client certificate's CN when one was presented. */
  readonly calls: Array<{ path: string; client: string | undefined }>;
  close(): Promise<void>;
}

async function tlsParticipant(options: https.ServerOptions): Promise<TlsParticipant> {
  const calls: TlsParticipant['calls'] = [];
  const server = https.createServer(options, (request, response) => {
    const peer = (request.socket as TLSSocket).getPeerCertificate();
    calls.push({
      path: request.url ?? '',
      client: typeof peer?.subject?.CN === 'string' ? peer.subject.CN : undefined,
    });
    response
      .writeHead(200, { 'content-type': 'application/json' })
      .end(request.url === '/v2/version' ? '{"version":"3.4.12"}' : '{"offset":42}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// The test's gateway and participant (an https one, or a wss one), closed after each test.
const current = perTest();

const get = (path: string) =>
  fetch(`${current.gw!.url}${path}`, { headers: current.gw!.auth(), signal: AbortSignal.timeout(10_000) });
const readyz = async () => (await fetch(`${current.gw!.adminUrl}/readyz`)).status;

describe('an https participant', () => {
  it('is refused when its certificate is not trusted (no CA configured, or a self-signed one): 503, nothing reaches it', async () => {
    for (const [cert, key, tls] of [
      ['test-participant.pem', 'test-only-participant-key.pem', {}], // signed by a CA the system does not know
      ['test-stranger.pem', 'test-only-stranger-key.pem', { caFile: CA }], // self-signed, not by the configured CA
    ] as const) {
      const participant = (current.upstream = await tlsParticipant({ cert: read(cert), key: read(key) }));
      current.gw = await startGateway(participant.url, { upstream: { tls, timeoutMs: 5_000 } });
      const answer = await get('/v2/state/ledger-end');
      expect(answer.status, cert).toBe(503);
      expect(await answer.json(), cert).toMatchObject({ code: 'GATEWAY_UPSTREAM_UNAVAILABLE' });
      expect((await get('/v2/version')).status, cert).toBe(503);
      expect(await readyz(), cert).toBe(503);
      expect(participant.calls, cert).toEqual([]);
      await current.gw.close();
      await participant.close();
      current.gw = current.upstream = undefined;
    }
  });

  it('is served once its CA is configured (upstream.tls.caFile): calls, the version cache and the readiness probe', async () => {
    const participant = (current.upstream = await tlsParticipant({
      cert: read('test-participant.pem'),
      key: read('test-only-participant-key.pem'),
    }));
    current.gw = await startGateway(participant.url, { upstream: { tls: { caFile: CA } } });
    const answer = await get('/v2/state/ledger-end');
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({ offset: 42 });
    expect(await (await get('/v2/version')).json()).toEqual({ version: '3.4.12' });
    await expect.poll(readyz, { timeout: 5_000, interval: 100 }).toBe(200);
    expect(participant.calls.map((call) => call.path)).toEqual(
      expect.arrayContaining(['/v2/state/ledger-end', '/v2/version']),
    );
  });

  it('verifies the name in upstream.tls.serverName when the URL names another host', async () => {
    const participant = (current.upstream = await tlsParticipant({
      cert: read('test-named-participant.pem'),
      key: read('test-only-named-key.pem'),
    }));
    current.gw = await startGateway(participant.url, { upstream: { tls: { caFile: CA }, timeoutMs: 5_000 } });
    expect((await get('/v2/state/ledger-end')).status).toBe(503); // the certificate names participant.test, not 127.0.0.1
    await current.gw.close();
    current.gw = await startGateway(participant.url, {
      upstream: { tls: { caFile: CA, serverName: 'participant.test' } },
    });
    expect((await get('/v2/state/ledger-end')).status).toBe(200);
    expect(participant.calls.filter((call) => call.path !== '/v2/version')).toHaveLength(1); // /v2/version: the readiness probe
  });

  it('presents the client certificate of upstream.tls.certFile/keyFile to a participant that requires one', async () => {
    const participant = (current.upstream = await tlsParticipant({
      cert: read('test-participant.pem'),
      key: read('test-only-participant-key.pem'),
      ca: read('test-ca.pem'),
      requestCert: true,
      rejectUnauthorized: true,
    }));
    current.gw = await startGateway(participant.url, { upstream: { tls: { caFile: CA }, timeoutMs: 5_000 } });
    expect((await get('/v2/state/ledger-end')).status).toBe(503); // no client certificate: the handshake fails
    await current.gw.close();
    current.gw = await startGateway(participant.url, {
      upstream: {
        tls: { caFile: CA, certFile: fixture('test-client.pem'), keyFile: fixture('test-only-client-key.pem') },
      },
    });
    expect((await get('/v2/state/ledger-end')).status).toBe(200);
    expect(participant.calls.filter((call) => call.path !== '/v2/version')).toEqual([
      { path: '/v2/state/ledger-end', client: 'ledger-gateway-client' },
    ]);
    await expect.poll(readyz, { timeout: 5_000, interval: 100 }).toBe(200); // the probe's own connection presents it too
    expect(participant.calls.every((call) => call.client === 'ledger-gateway-client')).toBe(true);
  });

  it('tunnels a WebSocket stream over TLS only to a participant whose certificate verifies', async () => {
    const wsParticipant = (current.upstream = await startWebSocketUpstream({
      cert: read('test-participant.pem'),
      key: read('test-only-participant-key.pem'),
    }));
    const open = (url: string) =>
      new Promise<{ opened: boolean; status?: number; echo?: string }>((resolve, reject) => {
        const socket = new WebSocket(url, ['daml.ws.auth'], { headers: current.gw!.auth() });
        socket.once('open', () => {
          socket.once('message', (data) => {
            resolve({ opened: true, echo: Buffer.from(data as Buffer).toString() });
            socket.close();
          });
          socket.send('{}');
        });
        socket.once('unexpected-response', (_request, response) => {
          response.resume();
          resolve({ opened: false, status: response.statusCode });
        });
        socket.once('error', reject);
      });
    current.gw = await startGateway(wsParticipant.url, { upstream: { timeoutMs: 5_000 } });
    expect(await open(`${current.gw.url.replace(/^http/, 'ws')}/v2/updates`)).toEqual({ opened: false, status: 503 });
    expect(wsParticipant.upgrades).toHaveLength(0);
    await current.gw.close();
    current.gw = await startGateway(wsParticipant.url, { upstream: { tls: { caFile: CA } } });
    expect(await open(`${current.gw.url.replace(/^http/, 'ws')}/v2/updates`)).toEqual({
      opened: true,
      echo: 'echo:{}',
    });
    expect(wsParticipant.upgrades).toHaveLength(1);
  });
});
