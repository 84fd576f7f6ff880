// The verified-token cache holds at most auth.tokenCache.maxBytes of tokens (their bytes as sent),
// besides maxEntries: tokens with large claims cannot fill the heap through it.
import { describe, expect, it } from 'vitest';
import { AuthFailure } from '../../src/auth/failure.js';
import { TokenCache } from '../../src/auth/token-cache.js';
import type { VerifiedToken } from '../../src/auth/verify.js';

const verified = (subject: string): VerifiedToken => ({
  principal: { subject, issuer: 'https://idp.test', claims: { sub: subject } },
  expiresAt: Math.floor(Date.now() / 1000) + 240,
  kind: 'audience',
});

describe('the token cache', () => {
  it('holds at most maxBytes of tokens: past it the least recently used go first, and a token over it is not kept', () => {
    const cache = new TokenCache({
      maxEntries: 10_000,
      maxBytes: 64 * 1024,
      negativeTtlMs: 0,
      clockToleranceSeconds: 5,
    });
    for (let i = 0; i < 100; i++) cache.rememberVerified(`key${i}`, verified(`user${i}`), cache.generation, 4_096);
    expect(cache.heldBytes).toBeLessThanOrEqual(64 * 1024);
    expect(cache.size.verified).toBe(16);
    expect(cache.lookup('key0')).toBeUndefined(); // the least recently used, forgotten
    expect(cache.lookup('key99')).toMatchObject({ principal: { subject: 'user99' } });
    cache.rememberVerified('huge', verified('huge'), cache.generation, 65 * 1024);
    expect(cache.lookup('huge')).toBeUndefined();
    expect(cache.heldBytes).toBeLessThanOrEqual(64 * 1024);
  });

  it('remembers at most 1,000 refused tokens: a flood of new bad tokens holds no more', () => {
    const cache = new TokenCache({ maxEntries: 10, maxBytes: 4_096, negativeTtlMs: 60_000, clockToleranceSeconds: 5 });
    for (let i = 0; i < 5_000; i++) cache.rememberRefusal(`bad${i}`, new AuthFailure('malformed'), cache.generation);
    expect(cache.size.refused).toBe(1_000);
    expect(cache.lookup('bad4999')).toBeInstanceOf(AuthFailure);
    expect(cache.lookup('bad0')).toBeUndefined();
  });
});
