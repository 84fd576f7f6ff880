// Brokered Canton tokens against a real OpenID provider (oidc-provider, client credentials): the
// gateway obtains the consumer's token, sends it in place of the client's credential on calls and
// stream upgrades (the subprotocol form included), asks once for 32 waiting calls, refreshes ahead of
// expiry; a provider down, stalling or answering garbage gives coded 503s at once, nothing leaked.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { echoOnce, startWebSocketUpstream, type WebSocketUpstream } from '../helpers/websocket-upstream.js';
import { closeAfterEach } from '../helpers/per-test.js';
import { logCapture } from '../helpers/log-capture.js';
import {
  CLIENT_ID,
  CLIENT_SECRET,
  LEDGER_SCOPE,
  startOpenIdProvider,
  type OpenIdProvider,
} from '../auth/support/openid-provider.js';
import { keyFilePath, ledgerEnd, newKey, writeKeys } from './support.js';

const AUDIENCE = 'https://daml.com/jwt/aud/participant/participant1';

let signingKey: JWK;
beforeAll(async () => {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true, modulusLength: 2048 });
  signingKey = { ...(await exportJWK(privateKey)), kid: `k-${randomUUID().slice(0, 8)}`, alg: 'RS256', use: 'sig' };
});

let provider: OpenIdProvider | undefined;
let upstream: RecordingUpstream | undefined;
let wsUpstream: WebSocketUpstream | undefined;
let gw: RunningGateway | undefined;
let stalling: http.Server | undefined;
closeAfterEach(
  () => gw,
  () => upstream,
  () => wsUpstream,
  () => provider,
  () =>
    stalling && {
      close: () =>
        new Promise<void>((resolve) => {
          stalling!.closeAllConnections();
          stalling!.close(() => resolve());
        }),
    },
);

function brokered(tokenUrl: string, timing: Record<string, number> = {}) {
  return {
    tokenUrl,
    clientId: CLIENT_ID,
    clientSecret: CLIENT_SECRET,
    clientAuthentication: 'post',
    scope: LEDGER_SCOPE,
    parameters: { resource: AUDIENCE },
    ...timing,
  };
}

async function gatewayFor(upstreamUrl: string, tokenUrl: string, timing: Record<string, number> = {}) {
  const file = keyFilePath();
  const { key, record } = newKey('payments');
  writeKeys(file, [record]);
  const log = logCapture();
  gw = await startGateway(
    upstreamUrl,
    {
      consumers: {
        list: [{ name: 'payments', upstreamToken: brokered(tokenUrl) }],
        keys: { store: 'file', file },
        upstreamTokens: { timeoutMs: 500, ...timing },
      },
    },
    { logger: log.logger },
  );
  return { key, log };
}

const claimsOf = (authorization: string | undefined) =>
  JSON.parse(Buffer.from(authorization!.split(' ')[1]!.split('.')[1]!, 'base64url').toString()) as Record<
    string,
    unknown
  >;

describe('brokered Canton tokens', () => {
  it('obtains the token once for 32 concurrent calls and sends it instead of the key', async () => {
    provider = await startOpenIdProvider({ audience: AUDIENCE, privateJwks: [signingKey] });
    upstream = await startRecordingUpstream();
    const { key, log } = await gatewayFor(upstream.url, provider.tokenEndpoint);
    const answers = await Promise.all(Array.from({ length: 32 }, () => ledgerEnd(gw!.url, `Bearer ${key}`)));
    expect(answers.map((answer) => answer.status)).toEqual(Array(32).fill(200));
    expect(provider.tokenRequests).toBe(1);
    const sent = new Set(upstream.requests.map((request) => request.headers.authorization));
    expect(sent.size).toBe(1);
    expect(claimsOf([...sent][0])).toMatchObject({ iss: provider.issuer, sub: CLIENT_ID, aud: AUDIENCE });
    expect(JSON.stringify(upstream.requests.map((request) => request.rawHeaders))).not.toContain(key);
    const logged = log.lines.join('\n');
    expect(logged).not.toContain(CLIENT_SECRET);
    expect(logged).not.toContain([...sent][0]!.slice(7));
    await expect
      .poll(() => gw!.registry.metrics())
      .toMatch(/ledger_gateway_upstream_token_requests_total\{consumer="payments",result="success"\} 1/);
  });

  it("replaces a consumer's own verified token: the client's Authorization never reaches the participant", async () => {
    provider = await startOpenIdProvider({ audience: AUDIENCE, privateJwks: [signingKey] });
    upstream = await startRecordingUpstream();
    gw = await startGateway(upstream.url, {
      consumers: {
        list: [
          { name: 'alice-app', match: { tokens: [{ sub: 'alice' }] }, upstreamToken: brokered(provider.tokenEndpoint) },
        ],
      },
    });
    const own = gw.auth().authorization!;
    expect((await ledgerEnd(gw.url, own)).status).toBe(200);
    const sent = upstream.requests[0]!;
    expect(sent.rawHeaders.filter((value) => value === own)).toEqual([]);
    expect(claimsOf(sent.headers.authorization)).toMatchObject({ iss: provider.issuer, sub: CLIENT_ID });
  });

  it('refreshes the token ahead of its expiry, the calls going on meanwhile', async () => {
    provider = await startOpenIdProvider({ audience: AUDIENCE, privateJwks: [signingKey], accessTokenTtlSeconds: 60 });
    upstream = await startRecordingUpstream();
    // Every token has less than 65 s left: the first call after one is got asks for the next.
    const { key } = await gatewayFor(upstream.url, provider.tokenEndpoint, {
      refreshBeforeExpirySeconds: 65,
      minRemainingSeconds: 5,
    });
    expect((await ledgerEnd(gw!.url, `Bearer ${key}`)).status).toBe(200);
    expect((await ledgerEnd(gw!.url, `Bearer ${key}`)).status).toBe(200);
    await expect.poll(() => provider!.tokenRequests, { timeout: 3_000 }).toBe(2);
    expect((await ledgerEnd(gw!.url, `Bearer ${key}`)).status).toBe(200);
    expect(upstream.requests.every((request) => request.headers.authorization?.startsWith('Bearer ey'))).toBe(true);
  });

  it('sends it on a stream upgrade in the jwt.token. subprotocol the key came in', async () => {
    provider = await startOpenIdProvider({ audience: AUDIENCE, privateJwks: [signingKey] });
    wsUpstream = await startWebSocketUpstream();
    const { key } = await gatewayFor(wsUpstream.url, provider.tokenEndpoint);
    const url = `${gw!.url.replace('http', 'ws')}/v2/updates`;
    expect(await echoOnce(url, [`jwt.token.${key}`, 'daml.ws.auth'])).toBe('echo:{}');
    const offered = String(wsUpstream.upgrades[0]!['sec-websocket-protocol']).split(',');
    expect(offered[1]).toBe('daml.ws.auth');
    expect(offered[0]).toMatch(/^jwt\.token\.ey/);
    expect(JSON.stringify(wsUpstream.upgrades[0])).not.toContain(key);
    expect(wsUpstream.upgrades[0]!.authorization).toBeUndefined();
  });

  it('answers a coded 503 while the identity provider is down, and serves again once it is back', async () => {
    provider = await startOpenIdProvider({ audience: AUDIENCE, privateJwks: [signingKey] });
    upstream = await startRecordingUpstream();
    const { key } = await gatewayFor(upstream.url, provider.tokenEndpoint);
    provider.setDown(true);
    const refused = await ledgerEnd(gw!.url, `Bearer ${key}`);
    expect(refused.status).toBe(503);
    expect(refused.json()).toMatchObject({
      code: 'GATEWAY_UPSTREAM_TOKEN_UNAVAILABLE',
      context: { consumer: 'payments' },
    });
    expect(refused.headers['retry-after']).toBe('1');
    expect(upstream.requests).toHaveLength(0);
    provider.setDown(false);
    await expect
      .poll(async () => (await ledgerEnd(gw!.url, `Bearer ${key}`)).status, { timeout: 5_000, interval: 200 })
      .toBe(200);
  });

  it.each([
    ['stalls', (_request: http.IncomingMessage, _response: http.ServerResponse) => undefined],
    [
      'answers HTML',
      (_r: http.IncomingMessage, response: http.ServerResponse) =>
        response.writeHead(200, { 'content-type': 'text/html' }).end('<html>oops</html>'),
    ],
    [
      'answers JSON without a token',
      (_r: http.IncomingMessage, response: http.ServerResponse) =>
        response.writeHead(200, { 'content-type': 'application/json' }).end('{"token_type":"bearer"}'),
    ],
    [
      'answers 10 MiB',
      (_r: http.IncomingMessage, response: http.ServerResponse) =>
        response
          .writeHead(200, { 'content-type': 'application/json' })
          .end(`{"access_token":"${'a'.repeat(10 * 1024 * 1024)}"}`),
    ],
    [
      'answers a token without expiry',
      (_r: http.IncomingMessage, response: http.ServerResponse) =>
        response
          .writeHead(200, { 'content-type': 'application/json' })
          .end('{"access_token":"opaque-token-value","token_type":"bearer"}'),
    ],
  ])('refuses with a coded 503 within the timeout when the token endpoint %s', async (_name, handler) => {
    stalling = http.createServer(handler);
    await new Promise<void>((resolve) => stalling!.listen(0, '127.0.0.1', resolve));
    upstream = await startRecordingUpstream();
    const { key, log } = await gatewayFor(
      upstream.url,
      `http://127.0.0.1:${(stalling.address() as AddressInfo).port}/token`,
      { timeoutMs: 300 },
    );
    const started = Date.now();
    const answers = await Promise.all(Array.from({ length: 8 }, () => ledgerEnd(gw!.url, `Bearer ${key}`)));
    expect(Date.now() - started).toBeLessThan(3_000);
    for (const answer of answers) expect(answer.json()).toMatchObject({ code: 'GATEWAY_UPSTREAM_TOKEN_UNAVAILABLE' });
    expect(upstream.requests).toHaveLength(0);
    const logged = log.lines.join('\n');
    expect(logged).not.toContain(CLIENT_SECRET);
    expect(logged).not.toContain('opaque-token-value');
    expect(logged).toMatch(/upstream token request failed/);
  });
});
