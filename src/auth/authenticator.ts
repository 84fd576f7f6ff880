// The authentication stage's core: token -> principal, through the verified-token cache, the
// verifier and the issuers' key sets. No Fastify here (hooks.ts attaches it).
import type { Dispatcher } from 'undici';
import type { AuthConfig } from '../config/schema.js';
import type { Operation } from '../operations.js';
import type { Principal } from '../exchange/exchange.js';
import type { TokenKind } from './claims.js';
import { resolveAuthConfig, type ResolvedAuth } from './config.js';
import { checkTokenShape, type TokenSource } from './extract.js';
import { AuthFailure } from './failure.js';
import { createKeySet, type KeySet, type RemoteKeySetOptions } from './key-set.js';
import { TokenCache, tokenCacheKey, type Connection } from './token-cache.js';
import { createTokenVerifier, failureOfJoseError, type TokenVerifier, type VerifiedToken } from './verify.js';

export interface Authenticator {
  /** The principal a token proves; rejects with AuthFailure. */
  authenticate(token: string): Promise<Principal>;
  /**
   * The same for the request path: answered at once (no promise) when the cache knows the token,
   * where it may also throw the AuthFailure. A token the cache does not know is first checked for
   * its shape (extract.ts checkTokenShape; `source` names it in the refusal). With `connection`
   * (the client's socket), the token that connection proved last answers without the keyed lookup.
   * The connection remembers `credential` and compares it whole: the token by default, or the
   * Authorization header value that carried it (one value always carries the same token).
   * `spendUnverified` runs first for a token the cache has not verified (before its refusal or its
   * signature check): it throws, or rejects, to refuse the call instead.
   */
  principalOf(
    token: string,
    source?: TokenSource,
    connection?: Connection,
    credential?: string,
    spendUnverified?: SpendUnverified,
  ): Principal | Promise<Principal>;
  /** The principal of the token this connection proved last, when `credential` is the one it came with (see principalOf); else undefined. */
  rememberedOn(connection: Connection, credential: string): Principal | undefined;
  /** False for auth.publicOperations and the participant's routes outside /v2 (Canton `ApiServices.scala`). */
  requiresToken(operation: Operation): boolean;
  /** Whether tokens of this `iss` are verified here (an issuer of the config or of the participant's IdPs). */
  knowsIssuer(issuer: string): boolean;
  /** Every issuer's keys are loaded (readiness check `keys`). */
  ready(): boolean;
  /** Signature verifications so far: a cache hit costs none. */
  readonly signatureChecks: number;
  /** Bytes of the verified tokens its cache remembers now (auth.tokenCache.maxBytes). */
  readonly tokenCacheBytes: number;
  readonly keySets: readonly KeySet[];
  readonly cache: TokenCache;
  readonly settings: ResolvedAuth;
  /** Fetch the key sets (not awaited: readiness reports until they load). */
  start(): void;
  close(): void;
}

export interface AuthenticatorOptions {
  readonly onKeySetFetch?: (issuer: string, result: 'success' | 'failure') => void;
  /** A token verified and accepted (once per token: the calls the cache then answers are not counted), and how (claims.ts). */
  readonly onTokenAccepted?: (issuer: string, kind: TokenKind) => void;
  readonly log?: RemoteKeySetOptions['log'];
  readonly now?: () => number;
  /** The connections an issuer's key set is fetched on (the participant's IdPs); undefined: fetch's own. */
  readonly keySetDispatcher?: (issuer: string) => Dispatcher | undefined;
}

/** Runs before any work on a token the cache has not verified; throws (or rejects) to refuse the call. */
export type SpendUnverified = () => void | Promise<void>;

/** A signature check in flight, and the token cache's generation when it started. */
interface PendingVerification {
  readonly generation: number;
  readonly outcome: Promise<VerifiedToken>;
}

/** One key set per issuer, in the settings' order; a key withdrawn from one empties the token cache. */
function issuerKeySets(
  settings: ResolvedAuth,
  cache: TokenCache,
  options: AuthenticatorOptions,
  now: () => number,
): KeySet[] {
  return settings.issuers.map((issuer) =>
    createKeySet(issuer.issuer, issuer.source, {
      fetchTimeoutMs: settings.keySets.fetchTimeoutMs,
      refreshIntervalMs: settings.keySets.refreshIntervalMs,
      cooldownMs: settings.keySets.unknownKeyCooldownMs,
      onFetch: (result) => options.onKeySetFetch?.(issuer.issuer, result),
      // A withdrawn key must stop authenticating at once, not when its tokens expire.
      onKeysWithdrawn: () => cache.clear(),
      log: options.log,
      now,
      dispatcher: options.keySetDispatcher?.(issuer.issuer),
    }),
  );
}

/**
 * Signature checks of tokens the cache does not know. Concurrent requests with the same new token
 * share one verification, if it started in the cache's current generation: one that started before
 * a key was withdrawn may be checking with that key.
 */
function sharedVerifications(
  cache: TokenCache,
  verifier: TokenVerifier,
  onAccepted: AuthenticatorOptions['onTokenAccepted'],
) {
  const inflight = new Map<string, PendingVerification>();

  /** Verifies a token; the outcome is stored only if no key was withdrawn meanwhile. */
  function startVerification(token: string, key: string): PendingVerification {
    const generation = cache.generation;
    const pending: PendingVerification = {
      generation,
      outcome: verifier
        .verify(token)
        .then(
          (verified) => {
            cache.rememberVerified(key, verified, generation, token.length);
            onAccepted?.(verified.principal.issuer ?? '', verified.kind);
            return verified;
          },
          (error: unknown) => {
            const failure = failureOfJoseError(error);
            cache.rememberRefusal(key, failure, generation);
            throw failure;
          },
        )
        .finally(() => {
          if (inflight.get(key) === pending) inflight.delete(key);
        }),
    };
    inflight.set(key, pending);
    return pending;
  }

  /** The verification of `token` (`key`: its cache key) under way in this generation, or a new one. */
  return (token: string, key: string): PendingVerification => {
    const pending = inflight.get(key);
    return pending === undefined || pending.generation !== cache.generation ? startVerification(token, key) : pending;
  };
}

/** Throws a ConfigError when the auth section cannot work (auth/config.ts; upstreamUrl is upstream.url). */
export function createAuthenticator(
  auth: AuthConfig,
  upstreamUrl: string,
  options: AuthenticatorOptions = {},
): Authenticator {
  const settings = resolveAuthConfig(auth, upstreamUrl);
  const now = options.now ?? Date.now;
  const cache = new TokenCache({
    maxEntries: settings.tokenCache.maxEntries,
    maxBytes: settings.tokenCache.maxBytes,
    negativeTtlMs: settings.tokenCache.negativeTtlMs,
    clockToleranceSeconds: settings.clockToleranceSeconds,
    now,
  });
  const keySets = issuerKeySets(settings, cache, options, now);
  const issuerNames = new Set(settings.issuers.map((issuer) => issuer.issuer));
  const verifier = createTokenVerifier(
    settings.issuers.map((issuer, index) => ({ config: issuer, keySet: keySets[index]! })),
    settings,
    now,
  );
  const verificationOf = sharedVerifications(cache, verifier, options.onTokenAccepted);

  function principalOf(
    token: string,
    source: TokenSource = 'bearer token',
    connection?: Connection,
    credential = token,
    spendUnverified?: SpendUnverified,
  ): Principal | Promise<Principal> {
    if (connection !== undefined) {
      const last = cache.lastVerifiedOn(connection, credential);
      if (last !== undefined) return last.principal;
    }
    const key = tokenCacheKey(token);
    const remembered = cache.lookup(key);
    if (remembered !== undefined && !(remembered instanceof AuthFailure)) {
      if (connection !== undefined) cache.rememberOn(connection, credential, remembered, cache.generation);
      return remembered.principal;
    }
    const spent = spendUnverified?.();
    if (spent === undefined) return unverifiedPrincipalOf(token, key, remembered, source, connection, credential);
    // The cache may have learned the token while the budget was asked (a shared store answers later).
    return spent.then(() => {
      const learned = cache.lookup(key);
      if (learned !== undefined && !(learned instanceof AuthFailure)) return learned.principal;
      return unverifiedPrincipalOf(token, key, learned, source, connection, credential);
    });
  }

  /** A token the cache has not verified: its remembered refusal, or its shape and signature checked. */
  function unverifiedPrincipalOf(
    token: string,
    key: string,
    refused: AuthFailure | undefined,
    source: TokenSource,
    connection: Connection | undefined,
    credential: string,
  ): Principal | Promise<Principal> {
    if (refused !== undefined) throw refused;
    checkTokenShape(token, source);
    const { generation, outcome } = verificationOf(token, key);
    return outcome.then((verified) => {
      if (connection !== undefined) cache.rememberOn(connection, credential, verified, generation);
      return verified.principal;
    });
  }

  return {
    authenticate: async (token) => principalOf(token),
    principalOf,
    rememberedOn: (connection, credential) => cache.lastVerifiedOn(connection, credential)?.principal,
    requiresToken: (operation) => !operation.participantInternal && !settings.publicOperations.has(operation.name),
    knowsIssuer: (issuer) => issuerNames.has(issuer),
    ready: () => keySets.every((keySet) => keySet.ready()),
    get tokenCacheBytes() {
      return cache.heldBytes;
    },
    get signatureChecks() {
      return verifier.signatureChecks;
    },
    keySets,
    cache,
    settings,
    start() {
      for (const keySet of keySets) keySet.start();
    },
    close() {
      for (const keySet of keySets) keySet.close();
      cache.clear();
    },
  };
}
