// Verified claims by SHA-256 of the token (the token itself is never a key in the shared cache), each
// kept until the token's exp at the latest; a hit still checks expiry against the clock. A client
// connection also remembers the last token it proved, so a keep-alive client's next call with the
// same token skips the hash and the LRU (see lastVerifiedOn). Refusals that
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

const kLastVerified = Symbol('ledger-gateway.lastVerifiedToken');

interface LastVerified {
  /** What carried the token (the token, or the header value it came in), compared whole. */
  credential: string;
  verified: VerifiedToken;
  /** The cache's generation when it was remembered: clear() ends every connection's memo at once. */
  generation: number;
}

/** What a client's calls share, and nobody else's: its connection (the socket). */
export type Connection = object & { [kLastVerified]?: LastVerified };

export class TokenCache {
  private readonly verified: LRUCache<string, VerifiedToken> | undefined;
  private readonly refused: LRUCache<string, AuthFailure> | undefined;
  private readonly options: TokenCacheOptions;
  private readonly now: () => number;
  /** Counts clear() calls. */
  private generation = 0;

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

  /**
   * The token this connection proved last, when this call presents the same credential (the token, or
   * the header value that carried it; compared whole), the cache has not been cleared since and it
   * has not expired; otherwise undefined, and the call
   * takes the keyed lookup. Only the connection that presented a token can match it, so no other
   * client can probe for it, and the reference ends with the connection or its next token.
   */
  lastVerifiedOn(connection: Connection, credential: string): VerifiedToken | undefined {
    const last = connection[kLastVerified];
    if (last === undefined || last.credential !== credential || last.generation !== this.generation) return undefined;
    if (isExpired(last.verified.expiresAt, Math.floor(this.now() / 1000), this.options.clockToleranceSeconds)) return undefined;
    return last.verified;
  }

  /**
   * Remembers a verified token on the connection that presented it (not when the cache is off).
   * Updated in place: behind a proxy that mixes clients on one connection it changes on most calls.
   */
  rememberOn(connection: Connection, credential: string, verified: VerifiedToken): void {
    if (this.verified === undefined) return;
    const last = connection[kLastVerified];
    if (last === undefined) {
      connection[kLastVerified] = { credential, verified, generation: this.generation };
    } else {
      last.credential = credential;
      last.verified = verified;
      last.generation = this.generation;
    }
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
    this.generation++;
    this.verified?.clear();
    this.refused?.clear();
  }

  get size(): { verified: number; refused: number } {
    return { verified: this.verified?.size ?? 0, refused: this.refused?.size ?? 0 };
  }
}
