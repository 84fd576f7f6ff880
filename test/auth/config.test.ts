import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { generateKeyPairSync } from 'node:crypto';
import { resolveAuthConfig, rsaModulusBits } from '../../src/auth/config.js';
import { ConfigError, validateGatewayConfig } from '../../src/config/load.js';
import { signingKey } from './support/keys.js';

const CERT = fileURLToPath(new URL('./fixtures/es256-cert.pem', import.meta.url));
const PRIVATE = fileURLToPath(new URL('./fixtures/test-only-es256-key.pem', import.meta.url));
const JWKS_URL = 'https://idp.example.com/certs';

function problemsOf(raw: Record<string, unknown>): readonly string[] {
  try {
    const config = validateGatewayConfig({ upstream: { url: 'http://participant:7575' }, ...raw });
    resolveAuthConfig(config.auth, config.upstream.url);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

const issuer = (fields: Record<string, unknown>) => ({ auth: { issuers: [{ issuer: 'https://idp', ...fields }] } });

describe('auth config: schema', () => {
  it('fills the defaults', () => {
    const { auth } = validateGatewayConfig({});
    expect(auth).toEqual({
      issuers: [],
      maxTokenLifetimeSeconds: 300,
      clockToleranceSeconds: 5,
      publicOperations: [],
      unsafeAllowHmacWithParticipant: false,
      keySets: { fetchTimeoutMs: 5000, refreshIntervalMs: 300000, unknownKeyCooldownMs: 5000 },
      tokenCache: { maxEntries: 10000, maxBytes: 8388608, negativeTtlMs: 5000 },
      participantIdentityProviders: {
        enabled: false,
        refreshIntervalSeconds: 60,
        allowedJwksHosts: [],
        maxIdentityProviders: 100,
        retryBackoffMaxSeconds: 3600,
      },
    });
  });

  it('refuses unknown keys, alg none and algorithms outside the list', () => {
    const run = () =>
      validateGatewayConfig({
        auth: { issuers: [{ issuer: 'x', jwksUrl: JWKS_URL, algorithms: ['none', 'HS384'], bogus: 1 }] },
      });
    expect(run).toThrow(ConfigError);
    try {
      run();
    } catch (error) {
      expect((error as ConfigError).problems).toEqual(
        expect.arrayContaining([
          'auth.issuers[0].bogus: unknown key',
          expect.stringMatching(/^auth\.issuers\[0\]\.algorithms\[0\]: must be one of/),
          expect.stringMatching(/^auth\.issuers\[0\]\.algorithms\[1\]: must be one of/),
        ]),
      );
    }
  });
});

describe('auth config: what the schema cannot say', () => {
  it('fails closed without an issuer (outside development mode)', () => {
    expect(problemsOf({})).toEqual([expect.stringMatching(/^auth\.issuers: at least one issuer is required/)]);
    expect(problemsOf({ auth: { participantIdentityProviders: { enabled: false } } })).toHaveLength(1);
  });

  it("starts without an issuer when the participant's identity providers are trusted", () => {
    expect(problemsOf({ auth: { participantIdentityProviders: { enabled: true } } })).toEqual([]);
  });

  it('wants exactly one key source per issuer', () => {
    expect(problemsOf(issuer({}))).toEqual([
      expect.stringMatching(/^auth\.issuers\[0\]: exactly one key source is required/),
    ]);
    expect(problemsOf(issuer({ jwksUrl: JWKS_URL, publicKeyFile: CERT }))).toEqual([
      expect.stringMatching(/found jwksUrl, publicKeyFile/),
    ]);
  });

  it('refuses HS256 without unsafeHmacSecret, and anything but HS256 with it', () => {
    expect(problemsOf(issuer({ jwksUrl: JWKS_URL, algorithms: ['RS256', 'HS256'] }))).toEqual([
      expect.stringMatching(/^auth\.issuers\[0\]\.algorithms: HS256 needs unsafeHmacSecret/),
    ]);
    expect(
      problemsOf({
        upstream: { url: 'sandbox' },
        ...issuer({ unsafeHmacSecret: 'x'.repeat(32), algorithms: ['RS256'] }),
      }),
    ).toEqual([
      expect.stringMatching(/^auth\.issuers\[0\]\.algorithms: an unsafeHmacSecret issuer verifies HS256 only/),
    ]);
  });

  it('allows an HMAC secret with the sandbox, refuses it with a participant unless explicitly unsafe', () => {
    const hmac = { issuer: 'dev', unsafeHmacSecret: 'x'.repeat(32) };
    expect(problemsOf({ auth: { issuers: [hmac] } })).toEqual([
      expect.stringMatching(/^auth\.issuers\[0\]\.unsafeHmacSecret: HS256 shared secrets are for development/),
    ]);
    const sandbox = resolveAuthConfig(
      validateGatewayConfig({ upstream: { url: 'sandbox' }, auth: { issuers: [hmac] } }).auth,
      'sandbox',
    );
    expect(sandbox.issuers[0]!.algorithms).toEqual(['HS256']);
    expect(sandbox.warnings).toEqual([expect.stringMatching(/^UNSAFE: issuer dev verifies HS256/)]);
    const unsafe = resolveAuthConfig(
      validateGatewayConfig({
        upstream: { url: 'http://p:1' },
        auth: { issuers: [hmac], unsafeAllowHmacWithParticipant: true },
      }).auth,
      'http://p:1',
    );
    expect(unsafe.warnings).toHaveLength(2);
  });

  it('wants https for a JWKS URL, except on loopback', () => {
    expect(problemsOf(issuer({ jwksUrl: 'http://idp.example.com/certs' }))).toEqual([
      expect.stringMatching(/^auth\.issuers\[0\]\.jwksUrl: must be https/),
    ]);
    expect(problemsOf(issuer({ jwksUrl: 'not a url' }))).toEqual(['auth.issuers[0].jwksUrl: not a URL']);
    expect(problemsOf(issuer({ jwksUrl: 'https://user:pw@idp/certs' }))).toEqual([
      'auth.issuers[0].jwksUrl: must not carry credentials',
    ]);
    for (const url of ['http://127.0.0.1:8080/certs', 'http://localhost/certs', 'http://[::1]:1/certs'])
      expect(problemsOf(issuer({ jwksUrl: url }))).toEqual([]);
  });

  it('reads a certificate or a public key file and pins the algorithms that fit it', async () => {
    const fromCert = resolveAuthConfig(
      validateGatewayConfig({ upstream: { url: 'http://p:1' }, ...issuer({ publicKeyFile: CERT }) }).auth,
      'http://p:1',
    );
    expect(fromCert.issuers[0]!.algorithms).toEqual(['ES256']);
    const rsa = await signingKey('RS256');
    const file = join(mkdtempSync(join(tmpdir(), 'auth-config-')), 'rsa.pem');
    writeFileSync(file, rsa.publicPem);
    const fromPem = resolveAuthConfig(
      validateGatewayConfig({ upstream: { url: 'http://p:1' }, ...issuer({ publicKeyFile: file }) }).auth,
      'http://p:1',
    );
    expect(fromPem.issuers[0]!.algorithms).toEqual(['RS256']);
    expect(problemsOf(issuer({ publicKeyFile: file, algorithms: ['RS256', 'ES256'] }))).toEqual([
      expect.stringMatching(/^auth\.issuers\[0\]\.algorithms: ES256 do not fit the rsa key/),
    ]);
    expect(problemsOf(issuer({ publicKeyFile: PRIVATE }))).toEqual([
      expect.stringMatching(/^auth\.issuers\[0\]\.publicKeyFile: .*holds a private key/),
    ]);
    expect(problemsOf(issuer({ publicKeyFile: '/nonexistent.pem' }))).toEqual([
      expect.stringMatching(/^auth\.issuers\[0\]\.publicKeyFile: cannot read a public key/),
    ]);
  });

  it('checks an inline JWKS: public keys with a kid, algorithms it can serve', async () => {
    const ec = await signingKey('ES256', 'ec-1');
    expect(problemsOf(issuer({ jwks: { keys: [ec.publicJwk] } }))).toEqual([]);
    const { kid: _kid, ...noKid } = ec.publicJwk;
    expect(problemsOf(issuer({ jwks: { keys: [noKid] } }))).toEqual([
      'auth.issuers[0].jwks.keys[0].kid: required (tokens select their key by kid)',
    ]);
    expect(problemsOf(issuer({ jwks: { keys: [{ ...ec.publicJwk, d: 'secret' }] } }))).toEqual([
      'auth.issuers[0].jwks.keys[0]: must be a public key',
    ]);
    expect(problemsOf(issuer({ jwks: { keys: [ec.publicJwk] }, algorithms: ['RS256'] }))).toEqual([
      'auth.issuers[0].algorithms: no key in jwks fits RS256',
    ]);
  });

  it('refuses an inline RSA key under 2048 bits at start: jose could verify no token with it', () => {
    const rsa = (bits: number, kid: string) => ({
      ...generateKeyPairSync('rsa', { modulusLength: bits }).publicKey.export({ format: 'jwk' }),
      kid,
    });
    for (const bits of [1024, 2047, 2048, 3072, 4096]) expect(rsaModulusBits(rsa(bits, 'k')), String(bits)).toBe(bits);
    expect(rsaModulusBits({ kty: 'EC', crv: 'P-256', x: 'x', y: 'y' })).toBeUndefined();
    expect(problemsOf(issuer({ jwks: { keys: [rsa(2048, 'ok'), rsa(1024, 'short')] } }))).toEqual([
      'auth.issuers[0].jwks.keys[1]: RSA keys must be at least 2048 bits (this one has 1024): no token signed with it could be verified',
    ]);
  });

  it('names every problem at once, by path', () => {
    expect(
      problemsOf({
        auth: {
          issuers: [
            { issuer: 'a', jwksUrl: JWKS_URL },
            { issuer: 'a', jwksUrl: JWKS_URL, algorithms: ['HS256'] },
          ],
          publicOperations: ['getVersion', 'unknown', 'noSuchOperation'],
        },
      }),
    ).toEqual([
      'auth.issuers[1].issuer: duplicate of auth.issuers[0].issuer (iss selects one issuer)',
      expect.stringMatching(/^auth\.issuers\[1\]\.algorithms: HS256 needs unsafeHmacSecret/),
      'auth.publicOperations[1]: unknown operation "unknown"',
      'auth.publicOperations[2]: unknown operation "noSuchOperation"',
    ]);
  });
});
