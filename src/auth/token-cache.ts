// Verified claims by SHA-256 of the token (the token itself is never a key in the shared cache), each
// kept until the token's exp at the latest; a hit still checks expiry against the clock. A client
// connection also remembers the last token it proved, so a keep-alive client's next call with the
// same token skips the hash and the LRU (see lastVerifiedOn). An outcome is stored only if the cache
// was not cleared while its verification ran (see generation). Refusals that
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
  'malformed',
  'algorithm',
  'bad_signature',
  'unknown_issuer',
  'expired',
  'no_expiry',
  'audience',
  'scope',
  'subject',
]);

const NEGATIVE_MAX_ENTRIES = 1_000;

export interface TokenCacheOptions {
  /** 0 disables the positive cache. */
  readonly maxEntries: number;
  /** Bytes of the tokens remembered (their length: a JWT is ASCII), the least recently used forgotten past it. */
  readonly maxBytes: number;
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
  /** The cache that remembered it: a reloaded configuration's new cache does not trust an old one's memo. */
  cache: TokenCache;
}

/** What a client's calls share, and nobody else's: its connection (the socket). */
export type Connection = object & { [kLastVerified]?: LastVerified };

export class TokenCache {
  private readonly verified: LRUCache<string, VerifiedToken> | undefined;
  private readonly refused: LRUCache<string, AuthFailure> | undefined;
  private readonly options: TokenCacheOptions;
  private readonly now: () => number;
  /** Counts clear() calls. */
  private clears = 0;

  constructor(options: TokenCacheOptions) {
    this.options = options;
    this.now = options.now ?? Date.now;
    this.verified =
      options.maxEntries > 0 ? new LRUCache({ max: options.maxEntries, maxSize: options.maxBytes }) : undefined;
    this.refused =
      options.negativeTtlMs > 0
        ? new LRUCache({ max: NEGATIVE_MAX_ENTRIES, ttl: options.negativeTtlMs, ttlAutopurge: false })
        : undefined;
  }

  /**
   * Read when a verification starts, and handed to the remember* calls with its outcome: a clear() in
   * between (a key withdrawn while the check ran) makes them drop it, or a token signed with the
   * withdrawn key would be accepted from the cache until its exp.
   */
  get generation(): number {
    return this.clears;
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
    if (last === undefined || last.credential !== credential || last.generation !== this.clears || last.cache !== this)
      return undefined;
    if (isExpired(last.verified.expiresAt, Math.floor(this.now() / 1000), this.options.clockToleranceSeconds))
      return undefined;
    return last.verified;
  }

  /**
   * Remembers a verified token on the connection that presented it (not when the cache is off, nor
   * when the cache was cleared since `generation`, the one its verification started in).
   * Updated in place: behind a proxy that mixes clients on one connection it changes on most calls.
   */
  rememberOn(connection: Connection, credential: string, verified: VerifiedToken, generation: number): void {
    if (this.verified === undefined || generation !== this.clears) return;
    const last = connection[kLastVerified];
    if (last === undefined) {
      connection[kLastVerified] = { credential, verified, generation, cache: this };
    } else {
      last.credential = credential;
      last.verified = verified;
      last.generation = generation;
      last.cache = this;
    }
  }

  /**
   * Stores a verified token `bytes` long, unless the cache was cleared since `generation` (its
   * verification's start).
   */
  rememberVerified(key: string, token: VerifiedToken, generation: number, bytes: number): void {
    if (this.verified === undefined || generation !== this.clears) return;
    const ttl = Math.floor((token.expiresAt + this.options.clockToleranceSeconds) * 1000 - this.now());
    if (ttl > 0) this.verified.set(key, token, { ttl, size: Math.max(1, bytes) });
  }

  /** Bytes of the verified tokens remembered now. */
  get heldBytes(): number {
    return this.verified?.calculatedSize ?? 0;
  }

  /** The same for a refusal: one reached with a withdrawn or replaced key may not hold for the new keys. */
  rememberRefusal(key: string, failure: AuthFailure, generation: number): void {
    if (generation === this.clears && REMEMBERED_REFUSALS.has(failure.reason)) this.refused?.set(key, failure);
  }

  /** Forget everything (a key was withdrawn from a key set). */
  clear(): void {
    this.clears++;
    this.verified?.clear();
    this.refused?.clear();
  }

  get size(): { verified: number; refused: number } {
    return { verified: this.verified?.size ?? 0, refused: this.refused?.size ?? 0 };
  }
}
