// Source rules (policy.sources) through the running gateway: calls and WebSocket upgrades refused by
// client address (the peer, or behind a trusted proxy its X-Forwarded-For hop; IPv4, IPv6 and
// IPv4-mapped) and by client certificate (none, wrong CA, right CA with another subject, the right
// one), whatever the token; other operations untouched; rules changed by a live reload.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { TLSSocket } from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { testConfig, startGateway, type RunningGateway } from '../helpers/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { echoOnce, startWebSocketUpstream, type WebSocketUpstream } from '../helpers/websocket-upstream.js';
import { TEST_PARTICIPANT } from '../helpers/tokens.js';

const fixture = (name: string) => new URL(`../proxy/fixtures/${name}`, import.meta.url).pathname;
const CA = fixture('test-ca.pem');
const listenerTls = { certFile: fixture('test-participant.pem'), keyFile: fixture('test-only-participant-key.pem') };
const PARTIES = '/v2/parties';
const LEDGER_END = '/v2/state/ledger-end';

let upstream: RecordingUpstream | undefined;
let wsUpstream: WebSocketUpstream | undefined;
let gw: RunningGateway | undefined;
afterEach(async () => {
  await gw?.close();
  await upstream?.close();
  await wsUpstream?.close();
  gw = upstream = wsUpstream = undefined;
});

/** A GET from a given loopback source address (127.0.0.0/8 is all this host's). */
function getFrom(source: string, path: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; code: string | undefined; source: string | undefined }>((resolve, reject) => {
    const request = http.get(
      `${gw!.url}${path}`,
      { localAddress: source, agent: false, headers: gw!.auth(headers) },
      (response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => (text += chunk.toString()));
        response.on('end', () => {
          const body = JSON.parse(text) as { code?: string; context?: Record<string, string> };
          resolve({ status: response.statusCode ?? 0, code: body.code, source: body.context?.source });
        });
      },
    );
    request.on('error', reject);
  });
}

describe('policy.sources: by client address', () => {
  it('refuses an operation from an address not allowed or denied, leaves the others alone, whatever the token', async () => {
    upstream = await startRecordingUpstream();
    gw = await startGateway(upstream.url, {
      policy: {
        sources: [
          { operations: ['getV2Parties'], allow: ['127.0.0.2/32', '127.0.0.3'] },
          { operations: ['getV2Parties'], deny: ['127.0.0.3'] },
        ],
      },
    });
    expect(await getFrom('127.0.0.1', PARTIES)).toMatchObject({
      status: 403,
      code: 'GATEWAY_SOURCE_NOT_ALLOWED',
      source: 'address',
    });
    expect(await getFrom('127.0.0.3', PARTIES)).toMatchObject({ status: 403, source: 'address' });
    expect((await getFrom('127.0.0.2', PARTIES)).status).toBe(200);
    expect((await getFrom('127.0.0.1', LEDGER_END)).status).toBe(200);
    expect(upstream.requests.map((request) => request.url)).toEqual([PARTIES, LEDGER_END]);
    // Counted by its code, like every refusal.
    expect(await gw.registry.getSingleMetricAsString('ledger_gateway_requests_total')).toMatch(
      /error_code="GATEWAY_SOURCE_NOT_ALLOWED"[^\n]*\} 2/,
    );
  });

  it('behind a trusted proxy judges the forwarded client address: IPv4, IPv6 and IPv4-mapped', async () => {
    upstream = await startRecordingUpstream();
    const sources = [{ operations: ['getV2Parties'], allow: ['10.0.0.0/8', 'fd00::/8'] }];
    gw = await startGateway(upstream.url, { server: { trustedProxies: ['127.0.0.1'] }, policy: { sources } });
    const statusFor = async (forwardedFor: string) =>
      (await getFrom('127.0.0.1', PARTIES, { 'x-forwarded-for': forwardedFor })).status;
    expect(await statusFor('10.1.2.3')).toBe(200);
    expect(await statusFor('192.0.2.1')).toBe(403);
    expect(await statusFor('fd00::1')).toBe(200);
    expect(await statusFor('2001:db8::1')).toBe(403);
    expect(await statusFor('::ffff:10.1.2.3')).toBe(200);
    expect(await statusFor('::ffff:192.0.2.1')).toBe(403);
    // A hop the client wrote left of a disallowed one does not help it.
    expect(await statusFor('10.1.2.3, 192.0.2.1')).toBe(403);
    await gw.close();

    // Without the proxy trusted, X-Forwarded-For is whatever the client wrote: the peer counts.
    gw = await startGateway(upstream.url, { policy: { sources } });
    expect(await statusFor('10.1.2.3')).toBe(403);
  });

  it('refuses a WebSocket upgrade by the same rules', async () => {
    wsUpstream = await startWebSocketUpstream();
    gw = await startGateway(wsUpstream.url, {
      server: { trustedProxies: ['127.0.0.1'] },
      policy: { sources: [{ operations: ['onV2Updates'], allow: ['10.0.0.0/8'] }] },
    });
    const open = (forwardedFor: string) =>
      echoOnce(`${gw!.url.replace('http:', 'ws:')}/v2/updates`, ['daml.ws.auth'], {
        headers: gw!.auth({ 'x-forwarded-for': forwardedFor }),
      });
    await expect(open('192.0.2.1')).rejects.toThrow('403');
    expect(wsUpstream.upgrades).toHaveLength(0);
    expect(await open('10.9.9.9')).toBe('echo:{}');
  });

  it('changes with a live reload: allowed, then refused, then allowed again', async () => {
    upstream = await startRecordingUpstream();
    gw = await startGateway(upstream.url);
    const reloadWith = async (sources: unknown[]) => {
      const config = testConfig(upstream!.url, {
        auth: { issuers: [gw!.issuer.issuerConfig], participantId: TEST_PARTICIPANT },
        policy: { sources },
      });
      expect((await gw!.gateway.reload(() => config, 'test')).result).toBe('success');
    };
    expect((await getFrom('127.0.0.1', PARTIES)).status).toBe(200);
    await reloadWith([{ deny: ['127.0.0.1'] }]);
    expect(await getFrom('127.0.0.1', PARTIES)).toMatchObject({ status: 403, source: 'address' });
    expect((await getFrom('127.0.0.2', PARTIES)).status).toBe(200);
    await reloadWith([]);
    expect((await getFrom('127.0.0.1', PARTIES)).status).toBe(200);
  });

  it('refuses at start a rule that names an unknown operation, an entry that is no address, or no condition', async () => {
    upstream = await startRecordingUpstream();
    await expect(
      startGateway(upstream.url, {
        policy: { sources: [{ operations: ['getV2Nope'], allow: ['10.0.0.0/33'] }, { operations: ['getV2Parties'] }] },
      }),
    ).rejects.toThrow(
      /policy\.sources\[0\]\.operations[\s\S]*policy\.sources\[0\]\.allow\[0\][\s\S]*policy\.sources\[1\]/,
    );
  });
});

interface Answer {
  readonly status: number;
  readonly code: string | undefined;
  readonly peer: string | undefined;
}

/** One HTTPS GET on a fresh connection with the given client certificate (or none). */
function httpsGet(path: string, client: { cert?: string; key?: string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = https.get(
      `${gw!.url}${path}`,
      {
        ca: [readFileSync(CA)],
        agent: false,
        headers: gw!.auth(),
        ...(client.cert !== undefined && { cert: readFileSync(fixture(client.cert)) }),
        ...(client.key !== undefined && { key: readFileSync(fixture(client.key)) }),
      },
      (response) => {
        const peer = (response.socket as TLSSocket).getPeerCertificate().subject?.CN;
        let body = '';
        response.on('data', (chunk: Buffer) => (body += chunk.toString()));
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            code: body.startsWith('{') ? (JSON.parse(body) as { code?: string }).code : undefined,
            peer: typeof peer === 'string' ? peer : undefined,
          }),
        );
      },
    );
    request.on('error', reject);
  });
}

const CLIENT = { cert: 'test-client.pem', key: 'test-only-client-key.pem' }; // CN=ledger-gateway-client, the test CA
const OTHER_SUBJECT = { cert: 'test-named-participant.pem', key: 'test-only-named-key.pem' }; // CN=participant.test, the test CA
const WRONG_CA = { cert: 'test-stranger.pem', key: 'test-only-stranger-key.pem' }; // self-signed

describe('policy.sources: by client certificate', () => {
  const opsOnly = (subjects: string[]) => [
    { operations: ['getV2Parties', 'onV2Updates'], clientCertificate: { subjects } },
  ];

  it('requires a certificate the client CA verified with an accepted subject, on calls and upgrades, in addition to the token', async () => {
    upstream = await startRecordingUpstream();
    gw = await startGateway(upstream.url, {
      server: { tls: { ...listenerTls, clientCaFile: CA, clientCertificate: 'request' } },
      policy: { sources: opsOnly(['CN=ledger-gateway-client']) },
    });
    expect(await httpsGet(PARTIES)).toMatchObject({ status: 403, code: 'GATEWAY_SOURCE_NOT_ALLOWED' });
    expect(await httpsGet(PARTIES, WRONG_CA)).toMatchObject({ status: 403, code: 'GATEWAY_SOURCE_NOT_ALLOWED' });
    expect(await httpsGet(PARTIES, OTHER_SUBJECT)).toMatchObject({ status: 403, code: 'GATEWAY_SOURCE_NOT_ALLOWED' });
    expect(await httpsGet(PARTIES, CLIENT)).toMatchObject({ status: 200 });
    // "request": a connection without a certificate still serves operations no rule names.
    expect(await httpsGet(LEDGER_END)).toMatchObject({ status: 200 });
    expect(upstream.requests.map((request) => request.url)).toEqual([PARTIES, LEDGER_END]);

    // The certificate never replaces the token.
    const noToken = await new Promise<number>((resolve, reject) => {
      https
        .get(
          `${gw!.url}${PARTIES}`,
          {
            ca: [readFileSync(CA)],
            agent: false,
            cert: readFileSync(fixture(CLIENT.cert)),
            key: readFileSync(fixture(CLIENT.key)),
          },
          (response) => {
            response.resume();
            resolve(response.statusCode ?? 0);
          },
        )
        .on('error', reject);
    });
    expect(noToken).toBe(401);
  });

  it('applies to WebSocket upgrades, and follows a live reload of the accepted subjects', async () => {
    wsUpstream = await startWebSocketUpstream();
    gw = await startGateway(wsUpstream.url, {
      server: { tls: { ...listenerTls, clientCaFile: CA, clientCertificate: 'request' } },
      policy: { sources: opsOnly(['CN=ledger-gateway-client']) },
    });
    const open = (client: { cert: string; key: string }) =>
      echoOnce(`${gw!.url.replace('https:', 'wss:')}/v2/updates`, ['daml.ws.auth'], {
        headers: gw!.auth(),
        ca: readFileSync(CA),
        cert: readFileSync(fixture(client.cert)),
        key: readFileSync(fixture(client.key)),
      });
    await expect(open(OTHER_SUBJECT)).rejects.toThrow('403');
    expect(await open(CLIENT)).toBe('echo:{}');

    const config = testConfig(wsUpstream.url, {
      server: { tls: { ...listenerTls, clientCaFile: CA, clientCertificate: 'request' } },
      auth: { issuers: [gw.issuer.issuerConfig], participantId: TEST_PARTICIPANT },
      policy: { sources: opsOnly(['CN=participant.test']) },
    });
    expect((await gw.gateway.reload(() => config, 'test')).result).toBe('success');
    expect(await open(OTHER_SUBJECT)).toBe('echo:{}');
    await expect(open(CLIENT)).rejects.toThrow('403');
  });

  it('with clientCertificate "require" refuses the TLS handshake of a client without a verified certificate', async () => {
    upstream = await startRecordingUpstream();
    gw = await startGateway(upstream.url, { server: { tls: { ...listenerTls, clientCaFile: CA } } });
    await expect(httpsGet(LEDGER_END)).rejects.toThrow();
    await expect(httpsGet(LEDGER_END, WRONG_CA)).rejects.toThrow();
    expect(await httpsGet(LEDGER_END, CLIENT)).toMatchObject({ status: 200, peer: '127.0.0.1' });
    expect(upstream.requests).toHaveLength(1);
  });
});
