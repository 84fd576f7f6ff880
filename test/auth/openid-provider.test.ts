// Against a real OpenID provider: its client-credentials JWT access tokens pass the gateway, its key
// rotation is followed without a restart, and its JWKS being down at start keeps /readyz at 503.
import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { rawRequest } from './support/http.js';
import { CLIENT_ID, LEDGER_SCOPE, startOpenIdProvider, type OpenIdProvider } from './support/openid-provider.js';
import { closeAfterEach } from '../helpers/per-test.js';

const AUDIENCE = 'https://daml.com/jwt/aud/participant/participant1';

async function privateJwk(alg: 'RS256' | 'ES256'): Promise<JWK> {
  const { privateKey } = await generateKeyPair(alg, { extractable: true, modulusLength: 2048 });
  return { ...(await exportJWK(privateKey)), kid: `${alg}-${randomUUID().slice(0, 8)}`, alg, use: 'sig' };
}

const claimsOf = (token: string) =>
  JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;
const headerOf = (token: string) =>
  JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString()) as Record<string, unknown>;

let first: JWK;
let second: JWK;
beforeAll(async () => {
  [first, second] = await Promise.all([privateJwk('RS256'), privateJwk('RS256')]);
});

let provider: OpenIdProvider | undefined;
let upstream: RecordingUpstream | undefined;
let gw: RunningGateway | undefined;
closeAfterEach(
  () => gw,
  () => upstream,
  () => provider,
);

async function gatewayFor(idp: OpenIdProvider, keySets: Record<string, number> = {}): Promise<RunningGateway> {
  upstream = await startRecordingUpstream();
  return startGateway(upstream.url, {
    auth: {
      // The example issuer: audience and scope both required.
      issuers: [{ issuer: idp.issuer, jwksUrl: idp.jwksUri, audience: AUDIENCE, scope: LEDGER_SCOPE }],
      participantId: 'participant1',
      keySets,
    },
  });
}

const call = (token: string) =>
  rawRequest(gw!.url, '/v2/updates/update-by-id', {
    method: 'POST',
    headers: ['Authorization', `Bearer ${token}`],
    body: '{"updateId":"1220ab","updateFormat":{}}',
  });

describe('a real OpenID provider (oidc-provider, client credentials)', () => {
  it('issues JWT access tokens with a Canton audience that pass the gateway unchanged', async () => {
    provider = await startOpenIdProvider({ audience: AUDIENCE, privateJwks: [first] });
    gw = await gatewayFor(provider);
    const token = await provider.accessToken();
    expect(headerOf(token)).toMatchObject({ alg: 'RS256', typ: 'at+jwt', kid: first.kid });
    expect(claimsOf(token)).toMatchObject({ iss: provider.issuer, sub: CLIENT_ID, aud: AUDIENCE, scope: LEDGER_SCOPE });

    const response = await call(token);
    expect(response.status).toBe(200);
    expect(upstream!.requests).toHaveLength(1);
    expect(upstream!.requests[0]!.headers.authorization).toBe(`Bearer ${token}`);
  });

  it('follows a key rotation without a restart: a new kid is fetched once, a withdrawn key stops working', async () => {
    provider = await startOpenIdProvider({ audience: AUDIENCE, privateJwks: [first] });
    gw = await gatewayFor(provider, { unknownKeyCooldownMs: 100, refreshIntervalMs: 600_000 });
    const oldToken = await provider.accessToken();
    expect((await call(oldToken)).status).toBe(200);
    const fetchesBefore = provider.jwksRequests;

    provider.rotate([second, first]); // the new key signs; the old one is still published
    await new Promise((resolve) => setTimeout(resolve, 150)); // past the unknown-kid cooldown
    const newToken = await provider.accessToken();
    expect(headerOf(newToken).kid).toBe(second.kid);
    expect((await call(newToken)).status).toBe(200);
    expect((await call(newToken)).status).toBe(200);
    expect(provider.jwksRequests).toBe(fetchesBefore + 1);
    expect((await call(oldToken)).status).toBe(200);
    expect(upstream!.requests).toHaveLength(4);
    await gw.close();

    // Withdrawal: found by the background refresh; the old token is refused although it was cached.
    gw = await gatewayFor(provider, { unknownKeyCooldownMs: 100, refreshIntervalMs: 300 });
    expect((await call(oldToken)).status).toBe(200);
    provider.rotate([second]);
    await expect.poll(async () => (await call(oldToken)).status, { timeout: 5_000, interval: 100 }).toBe(401);
    expect((await call(newToken)).status).toBe(200);
    expect(await gw.registry.metrics()).toMatch(/ledger_gateway_auth_failures_total\{reason="unknown_key"\} [1-9]/);
  });

  it('keeps /readyz at 503 while its JWKS is down at start, refusing tokens, until it comes up', async () => {
    provider = await startOpenIdProvider({ audience: AUDIENCE, privateJwks: [first] });
    const token = await provider.accessToken();
    provider.setDown(true);
    gw = await gatewayFor(provider, { unknownKeyCooldownMs: 200, fetchTimeoutMs: 500 });

    const notReady = await rawRequest(gw.adminUrl, '/readyz');
    expect(notReady.status).toBe(503);
    expect(notReady.json()).toMatchObject({ ready: false, checks: { keys: 'failing' } });
    const refused = await call(token);
    expect(refused.status).toBe(401);
    expect(refused.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
    expect(upstream!.requests).toEqual([]);

    provider.setDown(false);
    await expect
      .poll(async () => (await rawRequest(gw!.adminUrl, '/readyz')).status, { timeout: 5_000, interval: 100 })
      .toBe(200);
    expect((await call(token)).status).toBe(200);
    const metrics = await gw.registry.metrics();
    expect(metrics).toMatch(
      /ledger_gateway_jwks_refreshes_total\{issuer="http:\/\/127\.0\.0\.1:\d+",result="failure"\} [1-9]/,
    );
    expect(metrics).toMatch(
      /ledger_gateway_jwks_refreshes_total\{issuer="http:\/\/127\.0\.0\.1:\d+",result="success"\} 1/,
    );
    expect(metrics).toMatch(/ledger_gateway_auth_failures_total\{reason="keys_unavailable"\} 1/);
  });
});
