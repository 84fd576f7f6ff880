// Verified claims by SHA-256 of the token (the token itself is never a key in memory), each kept
// until the token's exp at the latest; a hit still checks expiry against the clock. Refusals that
// depend only on the token (bad signature, malformed, wrong audience, ...) are remembered briefly in
// a separate, smaller LRU, so a flood of one bad token costs one check and a flood of distinct
// garbage cannot evict the good entries.
import { hash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { isExpired } from './claims.js';
import { AuthFailure, type AuthFailureReason } from './failure.js';
import type { VerifiedToken } from './verify.js';

/** Refusals that stay refusals for the same token (not lifetime/nbf, which pass later, nor key set trouble). */
const REMEMBERED_REFUSALS: ReadonlySet<AuthFailureReason> = new Set<AuthFailureReason>([
  'malformed', 'algorithm', 'bad_signature', 'unknown_issuer', 'expired', 'no_expiry', 'audience', 'scope', 'subject',
]);

const NEGATIVE_MAX_ENTRIES = 1_000;

export interface TokenCacheOptions {
  /** 0 disables the positive cache. */
  readonly maxEntries: number;
  /** 0 disables the negative cache. */
  readonly negativeTtlMs: number;
  readonly clockToleranceSeconds: number;
  readonly now?: () => number;
}

export function tokenCacheKey(token: string): string {
  return hash('sha256', token, 'base64url');
}

export class TokenCache {
  private readonly verified: LRUCache<string, VerifiedToken> | undefined;
  private readonly refused: LRUCache<string, AuthFailure> | undefined;
  private readonly options: TokenCacheOptions;
  private readonly now: () => number;

  constructor(options: TokenCacheOptions) {
    this.options = options;
    this.now = options.now ?? Date.now;
    this.verified = options.maxEntries > 0 ? new LRUCache({ max: options.maxEntries }) : undefined;
    this.refused = options.negativeTtlMs > 0
      ? new LRUCache({ max: NEGATIVE_MAX_ENTRIES, ttl: options.negativeTtlMs, ttlAutopurge: false })
      : undefined;
  }

  /** The remembered outcome for a token key, if any. */
  lookup(key: string): VerifiedToken | AuthFailure | undefined {
    const verified = this.verified?.get(key);
    if (verified !== undefined) {
      if (isExpired(verified.expiresAt, Math.floor(this.now() / 1000), this.options.clockToleranceSeconds)) {
        this.verified!.delete(key);
        return new AuthFailure('expired', 'exp is in the past');
      }
      return verified;
    }
    return this.refused?.get(key);
  }

  rememberVerified(key: string, token: VerifiedToken): void {
    if (this.verified === undefined) return;
    const ttl = Math.floor((token.expiresAt + this.options.clockToleranceSeconds) * 1000 - this.now());
    if (ttl > 0) this.verified.set(key, token, { ttl });
  }

  rememberRefusal(key: string, failure: AuthFailure): void {
    if (REMEMBERED_REFUSALS.has(failure.reason)) this.refused?.set(key, failure);
  }

  /** Forget everything (a key was withdrawn from a key set). */
  clear(): void {
    this.verified?.clear();
    this.refused?.clear();
  }

  get size(): { verified: number; refused: number } {
    return { verified: this.verified?.size ?? 0, refused: this.refused?.size ?? 0 };
  }
}
