// RemoteKeySet against a real JWKS server on 127.0.0.1.
import { generateKeyPairSync } from 'node:crypto';
import { exportJWK, type JWK } from 'jose';
import { describe, expect, it } from 'vitest';
import { AuthFailure } from '../../src/auth/failure.js';
import { MAX_JWKS_BYTES, RemoteKeySet, type RemoteKeySetOptions } from '../../src/auth/key-set.js';
import { startJwksServer, type JwksServer } from './support/jwks-server.js';
import { signingKey } from './support/keys.js';
import { closeAfterEach } from '../helpers/per-test.js';

let server: JwksServer | undefined;
let keySet: RemoteKeySet | undefined;
closeAfterEach(
  () => keySet,
  () => server,
);

function remote(url: string, options: Partial<RemoteKeySetOptions> = {}): RemoteKeySet {
  keySet = new RemoteKeySet({
    issuer: 'https://idp',
    url: new URL(url),
    fetchTimeoutMs: 1_000,
    refreshIntervalMs: 60_000,
    cooldownMs: 60_000,
    ...options,
  });
  return keySet;
}

const header = (kid: string, alg = 'ES256') => ({ alg, kid });

/** The public point of the key a kid resolved to: the one the JWKS served under that kid, not merely some key. */
async function resolvedPoint(keys: RemoteKeySet, kid: string): Promise<string | undefined> {
  const key = await keys.resolve(header(kid), undefined as never);
  const { x } = await exportJWK(key);
  expect(x).toMatch(/^[\w-]{43}$/); // a P-256 point: these tests use ES256 keys only
  return x;
}

async function failureOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'resolved';
  } catch (error) {
    return error instanceof AuthFailure ? error.reason : String((error as { code?: string }).code);
  }
}

describe('RemoteKeySet', () => {
  it('fetches at start and reports each fetch', async () => {
    const key = await signingKey('ES256');
    server = await startJwksServer([key.publicJwk]);
    const results: string[] = [];
    const keys = remote(server.jwksUrl, { onFetch: (result) => results.push(result) });
    expect(keys.ready()).toBe(false);
    keys.start();
    expect(await resolvedPoint(keys, key.kid)).toBe(key.publicJwk.x);
    expect(keys.ready()).toBe(true);
    expect(results).toEqual(['success']);
    expect(server.requests).toBe(1);
  });

  it('warns once per key set about RSA keys under 2048 bits, which no token can be verified with', async () => {
    const ok = await signingKey('ES256', 'ok');
    const short: JWK = {
      ...generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ format: 'jwk' }),
      kid: 'short',
      use: 'sig',
    };
    server = await startJwksServer([ok.publicJwk, short]);
    const warnings: Array<{ object: object; message: string }> = [];
    const log = {
      warn: (object: object, message: string) => warnings.push({ object, message }),
      info: () => undefined,
    };
    const keys = remote(server.jwksUrl, { log });
    keys.start();
    expect(await resolvedPoint(keys, 'ok')).toBe(ok.publicJwk.x);
    expect(warnings).toEqual([
      {
        object: { issuer: 'https://idp', kids: ['short'] },
        message: 'JWKS holds RSA keys under 2048 bits: tokens signed with them are refused (bad_signature)',
      },
    ]);
  });

  it('refetches on an unknown kid at most once per cooldown, and follows a rotation', async () => {
    const [old, next, other] = await Promise.all([signingKey('ES256'), signingKey('ES256'), signingKey('ES256')]);
    server = await startJwksServer([old.publicJwk]);
    const keys = remote(server.jwksUrl, { cooldownMs: 300 });
    expect(await keys.refresh()).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 350));

    server.setKeys([next.publicJwk, old.publicJwk]); // rotation at the identity provider
    expect(await resolvedPoint(keys, next.kid)).toBe(next.publicJwk.x);
    expect(server.requests).toBe(2);

    // Within the cooldown, an unknown kid costs no fetch.
    expect(await failureOf(keys.resolve(header(other.kid), undefined as never))).toBe('ERR_JWKS_NO_MATCHING_KEY');
    expect(server.requests).toBe(2);
    await new Promise((resolve) => setTimeout(resolve, 350));
    expect(await failureOf(keys.resolve(header(other.kid), undefined as never))).toBe('ERR_JWKS_NO_MATCHING_KEY');
    expect(server.requests).toBe(3);
  });

  it('keeps the last good keys when a refresh fails', async () => {
    const key = await signingKey('ES256');
    server = await startJwksServer([key.publicJwk]);
    const results: string[] = [];
    const keys = remote(server.jwksUrl, { onFetch: (result) => results.push(result) });
    expect(await keys.refresh()).toBe(true);
    for (const behaviour of [
      { down: true },
      { status: 503 },
      { body: 'not json' },
      { body: '{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}' },
    ]) {
      server.setBehaviour(behaviour);
      expect(await keys.refresh()).toBe(false);
      expect(await resolvedPoint(keys, key.kid)).toBe(key.publicJwk.x);
      expect(keys.ready()).toBe(true);
    }
    expect(results).toEqual(['success', 'failure', 'failure', 'failure', 'failure']);
  });

  it('bounds a fetch by fetchTimeoutMs and the document by MAX_JWKS_BYTES', async () => {
    const key = await signingKey('ES256');
    server = await startJwksServer([key.publicJwk]);
    server.setBehaviour({ delayMs: 5_000 });
    const keys = remote(server.jwksUrl, { fetchTimeoutMs: 200 });
    const started = performance.now();
    expect(await keys.refresh()).toBe(false);
    expect(performance.now() - started).toBeLessThan(2_000);

    server.setBehaviour({ body: JSON.stringify({ keys: [key.publicJwk], padding: 'x'.repeat(MAX_JWKS_BYTES) }) });
    expect(await keys.refresh()).toBe(false);
    expect(keys.ready()).toBe(false);
  });

  it('refuses with keys_unavailable while the key set was never fetched', async () => {
    const key = await signingKey('ES256');
    server = await startJwksServer([key.publicJwk]);
    server.setBehaviour({ down: true });
    const keys = remote(server.jwksUrl, { cooldownMs: 100 });
    keys.start();
    expect(await failureOf(keys.resolve(header(key.kid), undefined as never))).toBe('keys_unavailable');
    server.setBehaviour({});
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(await resolvedPoint(keys, key.kid)).toBe(key.publicJwk.x);
  });

  it('retries a failed fetch after the cooldown and refreshes on schedule', async () => {
    const key = await signingKey('ES256');
    server = await startJwksServer([key.publicJwk]);
    server.setBehaviour({ down: true });
    const keys = remote(server.jwksUrl, { cooldownMs: 100, refreshIntervalMs: 150 });
    keys.start();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(keys.ready()).toBe(false);
    server.setBehaviour({});
    await expect.poll(() => keys.ready(), { timeout: 2_000, interval: 20 }).toBe(true);
    const fetched = server.requests;
    await expect.poll(() => server!.requests, { timeout: 2_000, interval: 20 }).toBeGreaterThan(fetched);
  });

  it('reports a withdrawn or changed key, not an added one', async () => {
    const [a, b] = await Promise.all([signingKey('ES256'), signingKey('ES256')]);
    server = await startJwksServer([a.publicJwk]);
    let withdrawn = 0;
    const keys = remote(server.jwksUrl, { onKeysWithdrawn: () => (withdrawn += 1) });
    await keys.refresh();
    server.setKeys([a.publicJwk, b.publicJwk]);
    await keys.refresh();
    expect(withdrawn).toBe(0);
    server.setKeys([b.publicJwk]);
    await keys.refresh();
    expect(withdrawn).toBe(1);
    expect(await failureOf(keys.resolve(header(a.kid), undefined as never))).toBe('ERR_JWKS_NO_MATCHING_KEY');
  });
});
