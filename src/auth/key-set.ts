// Key sets, one per issuer. A JWKS URL is held by RemoteKeySet rather than jose's
// createRemoteJWKSet, whose cache is built for a different trade-off (jose 6 src/jwks/remote.ts):
// once older than cacheMaxAge every verification waits on a refetch, a failed refetch fails the
// verification although the old keys are still in memory, and an unknown kid refetches only after a
// 30 s cooldown. Here: fetch at start, refresh in the background, keep the last good keys when a
// refresh fails, refetch on an unknown kid at most once per cooldown, verify through
// createLocalJWKSet over the current keys. A key rotated at the identity provider is picked up
// without a restart, and a slow identity provider never sits on the request path for long.
import {
  createLocalJWKSet,
  type CryptoKey,
  type FlattenedJWSInput,
  type JSONWebKeySet,
  type JWK,
  type JWSHeaderParameters,
  type KeyObject,
} from 'jose';
import type { Dispatcher } from 'undici';
import { MIN_RSA_BITS, rsaModulusBits, type KeySource } from './config.js';
import { AuthFailure } from './failure.js';

export type VerificationKey = CryptoKey | KeyObject | Uint8Array;

export interface KeySet {
  readonly issuer: string;
  /** JWKS sources pick the key by `kid`, so a token must carry one (Canton's jwt-jwks does the same). */
  readonly requiresKid: boolean;
  /**
   * The key for a token; throws AuthFailure('keys_unavailable'), jose's JWKSNoMatchingKey, or jose's
   * JWKSMultipleMatchingKeys when several keys fit its kid and alg (two keys under one kid during a
   * rotation): that error iterates over them, and verify.ts tries each.
   */
  resolve(header: JWSHeaderParameters, token: FlattenedJWSInput): Promise<VerificationKey>;
  ready(): boolean;
  /** A first fetch has ended, with keys or a failure (static keys: always). */
  attempted(): boolean;
  /** While not ready: why the last fetch failed (e.g. 'fetch failed: ECONNREFUSED'); else undefined. */
  failure?(): string | undefined;
  start(): void;
  close(): void;
}

type LocalKeySet = (header: JWSHeaderParameters, token: FlattenedJWSInput) => Promise<CryptoKey>;

/** A configured key that never changes: inline JWKS, PEM public key or certificate, HMAC secret. */
export function staticKeySet(issuer: string, source: Exclude<KeySource, { kind: 'jwksUrl' }>): KeySet {
  const base = { issuer, ready: () => true, attempted: () => true, start: () => undefined, close: () => undefined };
  switch (source.kind) {
    case 'jwks': {
      const local: LocalKeySet = createLocalJWKSet(source.jwks);
      return { ...base, requiresKid: true, resolve: (header, token) => local(header, token) };
    }
    case 'publicKey':
      return { ...base, requiresKid: false, resolve: async () => source.key };
    case 'hmac':
      return { ...base, requiresKid: false, resolve: async () => source.secret };
  }
}

/** Largest JWKS document accepted (a real one is a few kilobytes). */
export const MAX_JWKS_BYTES = 1_048_576;

export interface RemoteKeySetOptions {
  readonly issuer: string;
  readonly url: URL;
  readonly fetchTimeoutMs: number;
  readonly refreshIntervalMs: number;
  readonly cooldownMs: number;
  /** Each fetch's outcome, for ledger_gateway_jwks_refreshes_total. */
  readonly onFetch?: (result: 'success' | 'failure') => void;
  /** A fetch dropped or changed a key that was in use: verified tokens signed with it must be forgotten. */
  readonly onKeysWithdrawn?: () => void;
  readonly log?: { warn(object: object, message: string): void; info(object: object, message: string): void };
  readonly now?: () => number;
  /** The connections to fetch on (the participant's IdPs: live/participant-jwks-hosts.ts); else fetch's own. */
  readonly dispatcher?: Dispatcher;
}

async function readBounded(response: Response, limit: number): Promise<string> {
  const declared = Number(response.headers.get('content-length') ?? NaN);
  if (declared > limit) {
    await response.body?.cancel();
    throw new Error(`the JWKS is larger than ${limit} bytes`);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (response.body !== null) {
    for await (const piece of response.body) {
      const chunk = piece as Uint8Array;
      size += chunk.byteLength;
      if (size > limit) throw new Error(`the JWKS is larger than ${limit} bytes`);
      chunks.push(chunk);
    }
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Public signing keys only: a private or symmetric member is never used to verify. */
function verificationKeys(document: unknown): JSONWebKeySet {
  if (typeof document !== 'object' || document === null || !Array.isArray((document as { keys?: unknown }).keys)) {
    throw new Error('the response is not a JWKS ({ "keys": [...] })');
  }
  const keys = (document as { keys: unknown[] }).keys.filter(
    (key): key is JWK =>
      typeof key === 'object' &&
      key !== null &&
      !('d' in key) &&
      (key as JWK).kty !== 'oct' &&
      ((key as JWK).use === undefined || (key as JWK).use === 'sig'),
  );
  if (keys.length === 0) throw new Error('the JWKS holds no public signing key');
  return { keys };
}

/**
 * Every key of a set, whole. Not keyed by kid: two keys may share one (RFC 7517 §4.5 allows it
 * across key types), and a map by kid would hold only the last, so withdrawing the other went unseen.
 */
function fingerprints(jwks: JSONWebKeySet): Set<string> {
  return new Set(jwks.keys.map((key) => JSON.stringify(key)));
}

export class RemoteKeySet implements KeySet {
  readonly issuer: string;
  readonly requiresKid = true;
  private readonly options: RemoteKeySetOptions;
  private readonly now: () => number;
  private readonly abort = new AbortController();
  private local: LocalKeySet | undefined;
  private current = new Set<string>();
  private lastAttemptAt = Number.NEGATIVE_INFINITY;
  private pending: Promise<boolean> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private lastFailure: string | undefined;
  /** Completed fetches, successful or not (tests and the bench read it). */
  fetches = 0;

  constructor(options: RemoteKeySetOptions) {
    this.options = options;
    this.issuer = options.issuer;
    this.now = options.now ?? Date.now;
  }

  start(): void {
    void this.refresh();
  }

  ready(): boolean {
    return this.local !== undefined;
  }

  attempted(): boolean {
    return this.fetches > 0;
  }

  failure(): string | undefined {
    return this.ready() ? undefined : (this.lastFailure ?? 'not fetched yet');
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.abort.abort();
  }

  /** Fetch now (joins a fetch in flight). True when the keys were replaced. */
  refresh(): Promise<boolean> {
    if (this.pending !== undefined) return this.pending;
    if (this.closed) return Promise.resolve(false);
    this.lastAttemptAt = this.now();
    clearTimeout(this.timer);
    this.pending = this.fetchKeys().finally(() => {
      this.pending = undefined;
    });
    return this.pending;
  }

  /** A refetch on demand: joins one in flight, else at most one per cooldown. */
  private refreshOnDemand(): Promise<boolean> {
    if (this.pending !== undefined) return this.pending;
    if (this.now() - this.lastAttemptAt < this.options.cooldownMs) return Promise.resolve(false);
    return this.refresh();
  }

  async resolve(header: JWSHeaderParameters, token: FlattenedJWSInput): Promise<VerificationKey> {
    if (this.local === undefined) {
      await this.refreshOnDemand();
      if (this.local === undefined)
        throw new AuthFailure('keys_unavailable', `the key set of issuer ${this.issuer} could not be fetched`);
    }
    try {
      return await this.local(header, token);
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'ERR_JWKS_NO_MATCHING_KEY') throw error;
      // An unknown kid: the identity provider may have rotated its keys since the last fetch.
      if (!(await this.refreshOnDemand())) throw error;
      return this.local(header, token);
    }
  }

  private async fetchKeys(): Promise<boolean> {
    let ok = false;
    try {
      const signal = AbortSignal.any([this.abort.signal, AbortSignal.timeout(this.options.fetchTimeoutMs)]);
      const response = await fetch(this.options.url, {
        signal,
        redirect: 'error',
        headers: { accept: 'application/jwk-set+json, application/json' },
        ...(this.options.dispatcher !== undefined && { dispatcher: this.options.dispatcher }),
      });
      if (response.status !== 200) {
        await response.body?.cancel();
        throw new Error(`HTTP ${response.status} from the JWKS URL`);
      }
      const jwks = verificationKeys(JSON.parse(await readBounded(response, MAX_JWKS_BYTES)) as unknown);
      const local = createLocalJWKSet(jwks);
      const next = fingerprints(jwks);
      // A key dropped or changed (a changed key is a dropped one and a new one).
      const withdrawn = [...this.current].some((key) => !next.has(key));
      const first = this.local === undefined;
      this.local = local;
      this.current = next;
      ok = true;
      this.lastFailure = undefined;
      if (withdrawn) this.options.onKeysWithdrawn?.();
      if (first || withdrawn) {
        this.options.log?.info({ issuer: this.issuer, keys: next.size }, 'JWKS loaded');
        // jose verifies with no RSA key under 2048 bits: say so once per new key set, not per refused token.
        const short = jwks.keys
          .filter((key) => (rsaModulusBits(key) ?? MIN_RSA_BITS) < MIN_RSA_BITS)
          .map((key) => key.kid ?? '(no kid)');
        if (short.length > 0)
          this.options.log?.warn(
            { issuer: this.issuer, kids: short },
            `JWKS holds RSA keys under ${MIN_RSA_BITS} bits: tokens signed with them are refused (bad_signature)`,
          );
      }
    } catch (error) {
      if (!this.closed) {
        const message = fetchFailureCause(error, this.options.fetchTimeoutMs);
        this.lastFailure = message;
        this.options.log?.warn(
          { issuer: this.issuer, err: message },
          this.local === undefined
            ? 'JWKS fetch failed: tokens of this issuer are refused until it succeeds'
            : 'JWKS refresh failed: keeping the last good keys',
        );
      }
    }
    this.fetches += 1;
    if (this.closed) return false;
    this.options.onFetch?.(ok ? 'success' : 'failure');
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.refresh(), ok ? this.options.refreshIntervalMs : this.options.cooldownMs);
    this.timer.unref();
    return ok;
  }
}

/** fetch() rejects with 'fetch failed' alone; the reason (ECONNREFUSED, a TLS error, ...) is its cause. */
export function fetchFailureCause(error: unknown, timeoutMs: number): string {
  const { name, message, cause } = error as {
    name?: string;
    message?: string;
    cause?: { code?: unknown; message?: unknown };
  };
  if (name === 'TimeoutError') return `no answer within ${timeoutMs} ms`;
  const reason =
    typeof cause?.code === 'string' ? cause.code : typeof cause?.message === 'string' ? cause.message : undefined;
  return reason === undefined ? String(message) : `${String(message)}: ${reason}`;
}

/** The first failing key set's issuer and cause (readiness check `keys`'s detail). */
export function keySetsFailure(keySets: readonly KeySet[]): string | undefined {
  for (const keySet of keySets) {
    const failure = keySet.failure?.();
    if (failure !== undefined) return `${keySet.issuer}: ${failure}`;
  }
  return undefined;
}

export function createKeySet(
  issuer: string,
  source: KeySource,
  remote: Omit<RemoteKeySetOptions, 'issuer' | 'url'>,
): KeySet {
  return source.kind === 'jwksUrl'
    ? new RemoteKeySet({ ...remote, issuer, url: source.url })
    : staticKeySet(issuer, source);
}
