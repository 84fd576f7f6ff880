// Two keys under one `kid` in a JWKS, as identity providers publish them during a rotation: a token
// signed with either verifies, one signed with neither is refused once, and each matching key costs
// at most one signature check. Against a real JWKS endpoint on 127.0.0.1.
import { describe, expect, it } from 'vitest';
import { createAuthenticator, type Authenticator } from '../../src/auth/authenticator.js';
import { validateGatewayConfig } from '../../src/config/load.js';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { rawRequest } from './support/http.js';
import { startJwksServer, type JwksServer } from './support/jwks-server.js';
import { sign, signingKey, type AsymmetricAlgorithm, type SigningKey } from './support/keys.js';
import { reasonOf } from './support/outcome.js';
import { closeAfterEach } from '../helpers/per-test.js';

const ISSUER = 'https://idp.example.com';
const KID = 'rotating';

let jwks: JwksServer | undefined;
let auth: Authenticator | undefined;
let upstream: RecordingUpstream | undefined;
let gw: RunningGateway | undefined;
closeAfterEach(
  () => auth,
  () => gw,
  () => upstream,
  () => jwks,
);

const keysUnder = (kid: string, ...algorithms: AsymmetricAlgorithm[]) =>
  Promise.all(algorithms.map((alg) => signingKey(alg, kid)));

/** An authenticator whose issuer publishes `published` at a JWKS URL, loaded. */
async function authenticatorOver(published: readonly SigningKey[]): Promise<Authenticator> {
  jwks = await startJwksServer(published.map((key) => key.publicJwk));
  auth = createAuthenticator(
    validateGatewayConfig({
      upstream: { url: 'http://participant:7575' },
      auth: {
        issuers: [{ issuer: ISSUER, jwksUrl: jwks.jwksUrl, algorithms: ['ES256', 'RS256'] }],
        participantId: 'participant1',
      },
    }).auth,
    'http://participant:7575',
  );
  auth.start();
  await expect.poll(() => auth!.ready()).toBe(true);
  return auth;
}

/** The outcome of one token's first check, and how many signature checks it cost. */
async function checked(authenticator: Authenticator, token: string): Promise<{ outcome: string; checks: number }> {
  const before = authenticator.signatureChecks;
  const outcome = await reasonOf(authenticator.authenticate(token));
  return { outcome, checks: authenticator.signatureChecks - before };
}

describe('a JWKS with two keys under one kid', () => {
  it('verifies a token signed with either key, with at most one signature check per matching key', async () => {
    const [old, next] = await keysUnder(KID, 'ES256', 'ES256');
    const authenticator = await authenticatorOver([old!, next!]);
    const signedWithOld = await checked(authenticator, await sign(old!, { iss: ISSUER }));
    const signedWithNext = await checked(authenticator, await sign(next!, { iss: ISSUER }));
    expect([signedWithOld.outcome, signedWithNext.outcome]).toEqual(['accepted', 'accepted']);
    // Keys are tried in the JWKS's order: the first costs one check, the second two.
    expect([signedWithOld.checks, signedWithNext.checks]).toEqual([1, 2]);
    expect(jwks!.requests).toBe(1); // no refetch: the kid was known
  });

  it('refuses a token signed with neither once (bad_signature), a check per matching key, no refetch', async () => {
    const [old, next, stranger] = await keysUnder(KID, 'ES256', 'ES256', 'ES256');
    const authenticator = await authenticatorOver([old!, next!]);
    expect(await checked(authenticator, await sign(stranger!, { iss: ISSUER }))).toEqual({
      outcome: 'bad_signature',
      checks: 2,
    });
    expect(jwks!.requests).toBe(1);
  });

  it('tries only the keys that fit the alg: an RSA key under the same kid costs an ES256 token nothing', async () => {
    const [ec, rsa, otherEc] = await keysUnder(KID, 'ES256', 'RS256', 'ES256');
    const authenticator = await authenticatorOver([rsa!, ec!, otherEc!]);
    expect(await checked(authenticator, await sign(ec!, { iss: ISSUER }))).toEqual({ outcome: 'accepted', checks: 1 });
    expect(await checked(authenticator, await sign(rsa!, { iss: ISSUER }))).toEqual({ outcome: 'accepted', checks: 1 });
  });

  it('checks the claims once a key verified: an expired token signed with the second key is expired', async () => {
    const [old, next] = await keysUnder(KID, 'ES256', 'ES256');
    const authenticator = await authenticatorOver([old!, next!]);
    const expired = await sign(next!, {
      iss: ISSUER,
      iat: Math.floor(Date.now() / 1000) - 600,
      exp: Math.floor(Date.now() / 1000) - 300,
    });
    expect(await checked(authenticator, expired)).toEqual({ outcome: 'expired', checks: 2 });
  });

  it('answers a token signed with neither with one coded 401, and forwards one signed with either', async () => {
    const [old, next, stranger] = await keysUnder(KID, 'ES256', 'ES256', 'ES256');
    jwks = await startJwksServer([old!.publicJwk, next!.publicJwk]);
    upstream = await startRecordingUpstream();
    gw = await startGateway(upstream.url, {
      auth: { issuers: [{ issuer: ISSUER, jwksUrl: jwks.jwksUrl }], participantId: 'participant1' },
    });
    await expect
      .poll(async () => (await rawRequest(gw!.adminUrl, '/readyz')).status, { timeout: 5_000, interval: 50 })
      .toBe(200);
    const call = async (key: SigningKey) =>
      rawRequest(gw!.url, '/v2/users', { headers: ['Authorization', `Bearer ${await sign(key, { iss: ISSUER })}`] });

    const refused = await call(stranger!);
    expect(refused.status).toBe(401);
    expect(refused.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
    expect(refused.json()).toMatchObject({ code: 'NA', errorCategory: -1, grpcCodeValue: 16 });
    expect(upstream.requests).toHaveLength(0);
    expect((await call(old!)).status).toBe(200);
    expect((await call(next!)).status).toBe(200);
    expect(upstream.requests).toHaveLength(2);
    const metrics = await gw.registry.metrics();
    expect(metrics).toMatch(/ledger_gateway_auth_failures_total\{reason="bad_signature"\} 1\n/);
    expect(metrics).toMatch(/ledger_gateway_token_signature_checks_total 5\n/); // 2 + 1 + 2
  });
});
