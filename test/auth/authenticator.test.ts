// The authenticator's cache: a hit costs no signature check, still enforces expiry, and a flood of
// one bad token costs one check.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { SignJWT, importPKCS8 } from 'jose';
import { describe, expect, it, vi } from 'vitest';
import { createAuthenticator, type Authenticator } from '../../src/auth/authenticator.js';
import { validateGatewayConfig } from '../../src/config/load.js';
import { nowSeconds, participantAudience, sign, signingKey, tamperedPayload, type SigningKey } from './support/keys.js';
import { reasonOf } from './support/outcome.js';

const ISSUER = 'https://idp.example.com';

async function authenticator(
  key: SigningKey,
  auth: Record<string, unknown> = {},
  now?: () => number,
): Promise<Authenticator> {
  const config = validateGatewayConfig({
    upstream: { url: 'http://participant:7575' },
    auth: { issuers: [{ issuer: ISSUER, jwks: { keys: [key.publicJwk] } }], participantId: 'participant1', ...auth },
  });
  return createAuthenticator(config.auth, config.upstream.url, now === undefined ? {} : { now });
}

describe('authenticator', () => {
  it('returns the principal of a valid token: sub, issuer, claims', async () => {
    const key = await signingKey('ES256');
    const auth = await authenticator(key);
    const principal = await auth.authenticate(await sign(key, { iss: ISSUER, sub: 'alice' }));
    expect(principal).toMatchObject({ subject: 'alice', issuer: ISSUER, claims: { sub: 'alice', iss: ISSUER } });
    expect(Object.isFrozen(principal)).toBe(true);
  });

  it('refuses a token whose crit header names an extension it does not know as malformed, not as a bad algorithm', async () => {
    const key = await signingKey('ES256');
    const auth = await authenticator(key);
    const critical = new SignJWT({
      sub: 'alice',
      aud: participantAudience('participant1'),
      iss: ISSUER,
      iat: nowSeconds(),
      exp: nowSeconds() + 60,
    }).setProtectedHeader({ alg: 'ES256', kid: key.kid, crit: ['x-unknown'], 'x-unknown': 1 });
    const token = await critical.sign(key.privateKey, { crit: { 'x-unknown': true } });
    expect(await reasonOf(auth.authenticate(token))).toBe('malformed');
  });

  it('verifies a token once: later uses and concurrent first uses are cache hits', async () => {
    const key = await signingKey('RS256');
    const auth = await authenticator(key);
    const token = await sign(key, { iss: ISSUER });
    const principals = await Promise.all(Array.from({ length: 20 }, () => auth.authenticate(token)));
    expect(new Set(principals.map((p) => p.subject))).toEqual(new Set(['alice']));
    for (let i = 0; i < 100; i++) await auth.authenticate(token);
    expect(auth.signatureChecks).toBe(1);
    expect(auth.cache.size.verified).toBe(1);
  });

  it('still enforces expiry on a cache hit', async () => {
    const key = await signingKey('ES256');
    let clock = Date.now();
    const auth = await authenticator(key, {}, () => clock);
    const token = await sign(key, { iss: ISSUER, exp: nowSeconds() + 30 });
    await auth.authenticate(token);
    clock += 36_000; // past exp + the 5 s clock tolerance, while lru-cache's own timer has not run
    expect(await reasonOf(auth.authenticate(token))).toBe('expired');
    expect(auth.signatureChecks).toBe(1);
  });

  it('remembers a refusal briefly, so a flood of one bad token costs one check', async () => {
    const key = await signingKey('ES256');
    const auth = await authenticator(key);
    const forged = tamperedPayload(await sign(key, { iss: ISSUER }), { sub: 'participant_admin' });
    const reasons = await Promise.all(Array.from({ length: 50 }, () => reasonOf(auth.authenticate(forged))));
    expect(new Set(reasons)).toEqual(new Set(['bad_signature']));
    expect(auth.signatureChecks).toBe(1);
  });

  it('does not remember a refusal that may pass later (a lifetime over the limit)', async () => {
    const key = await signingKey('ES256');
    const auth = await authenticator(key);
    const longLived = await sign(key, { iss: ISSUER, exp: nowSeconds() + 3_600 });
    expect(await reasonOf(auth.authenticate(longLived))).toBe('lifetime');
    expect(await reasonOf(auth.authenticate(longLived))).toBe('lifetime');
    expect(auth.signatureChecks).toBe(2);
  });

  it('verifies every time with the cache off', async () => {
    const key = await signingKey('ES256');
    const auth = await authenticator(key, { tokenCache: { maxEntries: 0, negativeTtlMs: 0 } });
    const token = await sign(key, { iss: ISSUER });
    for (let i = 0; i < 3; i++) await auth.authenticate(token);
    expect(auth.signatureChecks).toBe(3);
  });

  it("keeps public operations and the participant's own routes outside /v2 token-free", async () => {
    const key = await signingKey('ES256');
    const auth = await authenticator(key, { publicOperations: ['getVersion'] });
    const op = (name: string, participantInternal = false) => ({
      name,
      method: 'GET',
      template: '/',
      kind: 'http' as const,
      participantInternal,
      writes: false,
    });
    expect(auth.requiresToken(op('getVersion'))).toBe(false);
    expect(auth.requiresToken(op('getReadyz', true))).toBe(false);
    expect(auth.requiresToken(op('getV2Users'))).toBe(true);
    expect(auth.requiresToken(op('unknown'))).toBe(true);
  });
});

describe('the token a connection proved last', () => {
  /** An authenticator, alice's token, a spy on the keyed lookup and a fresh connection. */
  async function aliceOnAConnection() {
    const key = await signingKey('ES256');
    const auth = await authenticator(key);
    const token = await sign(key, { iss: ISSUER, sub: 'alice' });
    return { auth, token, lookup: vi.spyOn(auth.cache, 'lookup'), connection: {} };
  }

  it("answers that connection's next call with the same token without the keyed lookup; other connections look up", async () => {
    const { auth, token, lookup, connection } = await aliceOnAConnection();
    expect(await auth.principalOf(token, 'bearer token', connection)).toMatchObject({ subject: 'alice' });
    expect(lookup).toHaveBeenCalledTimes(1);
    for (let i = 0; i < 5; i++)
      expect(auth.principalOf(token, 'bearer token', connection)).toMatchObject({ subject: 'alice' });
    expect(lookup).toHaveBeenCalledTimes(1);
    expect(await auth.principalOf(token, 'bearer token', {})).toMatchObject({ subject: 'alice' });
    expect(lookup).toHaveBeenCalledTimes(2);
    expect(auth.signatureChecks).toBe(1);
  });

  it('never answers for another token on the same connection', async () => {
    const key = await signingKey('ES256');
    const auth = await authenticator(key);
    const connection = {};
    await auth.principalOf(await sign(key, { iss: ISSUER, sub: 'alice' }), 'bearer token', connection);
    expect(
      await auth.principalOf(await sign(key, { iss: ISSUER, sub: 'bob' }), 'bearer token', connection),
    ).toMatchObject({ subject: 'bob' });
    const forged = tamperedPayload(await sign(key, { iss: ISSUER, sub: 'bob' }), { sub: 'participant_admin' });
    expect(await reasonOf(Promise.resolve().then(() => auth.principalOf(forged, 'bearer token', connection)))).toBe(
      'bad_signature',
    );
  });

  it('remembers the header value that carried the token when given one: the same value answers at once, another value looks up', async () => {
    const { auth, token, lookup, connection } = await aliceOnAConnection();
    await auth.principalOf(token, 'bearer token', connection, `Bearer ${token}`);
    expect(auth.principalOf(token, 'bearer token', connection, `Bearer ${token}`)).toMatchObject({ subject: 'alice' });
    expect(lookup).toHaveBeenCalledTimes(1);
    // Another header value carrying the same token (another spacing): the keyed lookup, then it is remembered.
    expect(auth.principalOf(token, 'bearer token', connection, `bearer  ${token}`)).toMatchObject({ subject: 'alice' });
    expect(lookup).toHaveBeenCalledTimes(2);
    // A forged token never matches the remembered header value.
    const forged = tamperedPayload(token, { sub: 'participant_admin' });
    expect(
      await reasonOf(
        Promise.resolve().then(() => auth.principalOf(forged, 'bearer token', connection, `Bearer ${forged}`)),
      ),
    ).toBe('bad_signature');
    expect(auth.signatureChecks).toBe(2);
  });

  it('ends when the cache is cleared (a key was withdrawn): the token is checked again', async () => {
    const key = await signingKey('ES256');
    const auth = await authenticator(key);
    const token = await sign(key, { iss: ISSUER });
    const connection = {};
    await auth.principalOf(token, 'bearer token', connection);
    auth.cache.clear();
    await auth.principalOf(token, 'bearer token', connection);
    expect(auth.signatureChecks).toBe(2);
  });

  it('still enforces expiry', async () => {
    const key = await signingKey('ES256');
    let clock = Date.now();
    const auth = await authenticator(key, {}, () => clock);
    const token = await sign(key, { iss: ISSUER, exp: nowSeconds() + 30 });
    const connection = {};
    await auth.principalOf(token, 'bearer token', connection);
    clock += 36_000;
    expect(await reasonOf(Promise.resolve().then(() => auth.principalOf(token, 'bearer token', connection)))).toBe(
      'expired',
    );
  });

  it('is off with the cache off: every call is checked', async () => {
    const key = await signingKey('ES256');
    const auth = await authenticator(key, { tokenCache: { maxEntries: 0, negativeTtlMs: 0 } });
    const token = await sign(key, { iss: ISSUER });
    const connection = {};
    for (let i = 0; i < 3; i++) await auth.principalOf(token, 'bearer token', connection);
    expect(auth.signatureChecks).toBe(3);
  });
});

describe('other key sources', () => {
  const claims = () => ({ sub: 'alice', aud: participantAudience('participant1'), exp: nowSeconds() + 60 });

  it('verifies with an X.509 certificate file (publicKeyFile), no kid needed, algorithm pinned to the key', async () => {
    const cert = fileURLToPath(new URL('./fixtures/es256-cert.pem', import.meta.url));
    const privateKey = await importPKCS8(
      readFileSync(new URL('./fixtures/test-only-es256-key.pem', import.meta.url), 'utf8'),
      'ES256',
    );
    const auth = createAuthenticator(
      validateGatewayConfig({
        upstream: { url: 'http://participant:7575' },
        auth: { issuers: [{ issuer: ISSUER, publicKeyFile: cert }] },
      }).auth,
      'http://participant:7575',
    );
    const token = await new SignJWT({ ...claims(), iss: ISSUER }).setProtectedHeader({ alg: 'ES256' }).sign(privateKey);
    await expect(auth.authenticate(token)).resolves.toMatchObject({ subject: 'alice' });
    const other = await signingKey('ES256');
    expect(await reasonOf(auth.authenticate(await sign(other, { iss: ISSUER }, { kid: undefined })))).toBe(
      'bad_signature',
    );
    expect(await reasonOf(auth.authenticate(await sign(await signingKey('RS256'), { iss: ISSUER })))).toBe('algorithm');
  });

  it('verifies HS256 with unsafeHmacSecret (sandbox only), and nothing else from that issuer', async () => {
    const secret = 'development-secret-of-32-characters!';
    const auth = createAuthenticator(
      validateGatewayConfig({
        upstream: { url: 'sandbox' },
        auth: { issuers: [{ issuer: ISSUER, unsafeHmacSecret: secret }] },
      }).auth,
      'sandbox',
    );
    const token = await new SignJWT({ ...claims(), iss: ISSUER })
      .setProtectedHeader({ alg: 'HS256' })
      .sign(new TextEncoder().encode(secret));
    await expect(auth.authenticate(token)).resolves.toMatchObject({ subject: 'alice' });
    const wrong = await new SignJWT({ ...claims(), iss: ISSUER })
      .setProtectedHeader({ alg: 'HS256' })
      .sign(new TextEncoder().encode('x'.repeat(32)));
    expect(await reasonOf(auth.authenticate(wrong))).toBe('bad_signature');
    expect(await reasonOf(auth.authenticate(await sign(await signingKey('ES256'), { iss: ISSUER })))).toBe('algorithm');
  });
});
