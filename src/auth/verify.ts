// Signature and claims of one token: the issuer is picked by the unverified `iss` (as Canton's
// IdentityProviderAwareAuthService.scala does), then jose verifies with that issuer's
// pinned algorithms and keys, then the Canton claim checks run (claims.ts).
import { decodeJwt, decodeProtectedHeader, jwtVerify, type JWTPayload, type JWTVerifyOptions } from 'jose';
import { JWS_ALGORITHMS } from '../config/schema.js';
import type { Principal } from '../exchange/exchange.js';
import { checkClaims, type ClaimRules, type TokenKind } from './claims.js';
import type { ResolvedIssuer } from './config.js';
import { AuthFailure } from './failure.js';
import type { KeySet, VerificationKey } from './key-set.js';

export interface VerifiedToken {
  readonly principal: Principal;
  /** exp, epoch seconds. */
  readonly expiresAt: number;
  /** Accepted through an audience or a scope (claims.ts). */
  readonly kind: TokenKind;
}

export interface TokenVerifier {
  /** Throws AuthFailure. */
  verify(token: string): Promise<VerifiedToken>;
  /** Signature verifications run so far (a cache hit runs none). */
  readonly signatureChecks: number;
}

export interface VerifierIssuer {
  readonly config: ResolvedIssuer;
  readonly keySet: KeySet;
}

export interface VerifierPolicy {
  readonly participantId: string | undefined;
  readonly maxTokenLifetimeSeconds: number;
  readonly clockToleranceSeconds: number;
}

const KNOWN_ALGORITHMS: ReadonlySet<string> = new Set([...JWS_ALGORITHMS, 'none', 'HS384', 'HS512']);

/** jose's stable error codes -> reasons. JWTExpired is not a JWTClaimValidationFailed: branch on `code`. */
export function failureOfJoseError(error: unknown): AuthFailure {
  if (error instanceof AuthFailure) return error;
  const { code, claim, reason } = error as { code?: unknown; claim?: unknown; reason?: unknown };
  switch (code) {
    case 'ERR_JWT_EXPIRED':
      return new AuthFailure('expired', 'exp is in the past');
    case 'ERR_JWT_CLAIM_VALIDATION_FAILED':
      if (claim === 'nbf') return new AuthFailure('not_yet_valid', 'nbf is in the future');
      if (claim === 'exp')
        return reason === 'missing'
          ? new AuthFailure('no_expiry', 'the token has no exp claim')
          : new AuthFailure('malformed', 'exp is not a number');
      if (claim === 'iss') return new AuthFailure('unknown_issuer', 'iss does not match');
      return new AuthFailure(
        'malformed',
        `the ${typeof claim === 'string' ? claim.slice(0, 20) : ''} claim is invalid`,
      );
    case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
      return new AuthFailure('bad_signature', 'the signature does not verify');
    case 'ERR_JOSE_NOT_SUPPORTED':
      // jose's one other "not supported": a crit header naming an extension it does not know (RFC 7515 §4.1.11).
      if (String((error as Error).message).startsWith('Extension Header Parameter'))
        return new AuthFailure('malformed', 'the crit header names an extension that is not supported');
      return new AuthFailure('algorithm', 'the algorithm is not allowed for this issuer or key');
    case 'ERR_JOSE_ALG_NOT_ALLOWED':
      return new AuthFailure('algorithm', 'the algorithm is not allowed for this issuer or key');
    case 'ERR_JWKS_NO_MATCHING_KEY':
      return new AuthFailure('unknown_key', "no key of the issuer matches the token's kid and alg");
    case 'ERR_JWKS_MULTIPLE_MATCHING_KEYS':
      return new AuthFailure('unknown_key', "several keys of the issuer match the token's kid");
    case 'ERR_JWKS_TIMEOUT':
      return new AuthFailure('keys_unavailable', 'the key set fetch timed out');
    case 'ERR_JWS_INVALID':
    case 'ERR_JWT_INVALID':
    case 'ERR_JWK_INVALID':
    case 'ERR_JWKS_INVALID':
      return new AuthFailure('malformed', 'not a valid signed JWT');
    default:
      // A key that cannot serve the algorithm ends here (jose throws a TypeError): never a pass.
      return new AuthFailure('bad_signature', `verification failed (${(error as Error)?.name ?? 'error'})`);
  }
}

export function createTokenVerifier(
  issuers: readonly VerifierIssuer[],
  policy: VerifierPolicy,
  now: () => number = Date.now,
): TokenVerifier {
  const byIssuer = new Map(issuers.map((entry) => [entry.config.issuer, entry]));
  let signatureChecks = 0;

  async function verify(token: string): Promise<VerifiedToken> {
    let header: ReturnType<typeof decodeProtectedHeader>;
    let unverified: JWTPayload;
    try {
      header = decodeProtectedHeader(token);
      unverified = decodeJwt(token);
    } catch {
      throw new AuthFailure('malformed', 'the header or claims do not decode as JSON objects');
    }
    if (typeof unverified.iss !== 'string') throw new AuthFailure('unknown_issuer', 'the token has no iss claim');
    const entry = byIssuer.get(unverified.iss);
    if (entry === undefined) throw new AuthFailure('unknown_issuer', 'no configured issuer matches iss');
    const { config, keySet } = entry;
    const alg = header.alg;
    if (typeof alg !== 'string' || !(config.algorithms as readonly string[]).includes(alg)) {
      const shown = typeof alg === 'string' && KNOWN_ALGORITHMS.has(alg) ? alg : 'an unrecognised alg';
      throw new AuthFailure(
        'algorithm',
        `${shown} is not pinned for issuer ${config.issuer} (${config.algorithms.join(', ')})`,
      );
    }
    if (keySet.requiresKid && (typeof header.kid !== 'string' || header.kid === '')) {
      throw new AuthFailure(
        'unknown_key',
        `issuer ${config.issuer} publishes a key set: the token must name its key by kid`,
      );
    }

    signatureChecks += 1;
    const at = now();
    const options: JWTVerifyOptions = {
      algorithms: [...config.algorithms],
      issuer: config.issuer,
      clockTolerance: policy.clockToleranceSeconds,
      requiredClaims: ['exp'],
      currentDate: new Date(at),
    };
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, (header, input) => keySet.resolve(header, input), options));
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'ERR_JWKS_MULTIPLE_MATCHING_KEYS') throw failureOfJoseError(error);
      payload = await verifyWithEachKey(token, error as AsyncIterable<VerificationKey>, options);
    }

    const rules: ClaimRules = {
      audience: config.audience,
      scope: config.scope,
      participantId: policy.participantId,
      maxTokenLifetimeSeconds: policy.maxTokenLifetimeSeconds,
      clockToleranceSeconds: policy.clockToleranceSeconds,
    };
    const { subject, expiresAt, kind } = checkClaims(payload, rules, Math.floor(at / 1000));
    return {
      principal: Object.freeze({ subject, issuer: config.issuer, claims: Object.freeze({ ...payload }) }),
      expiresAt,
      kind,
    };
  }

  /**
   * jose does not choose among several keys that fit a token's kid and alg: it throws
   * JWKSMultipleMatchingKeys, which iterates over them (jose's documented way is to try each).
   * Identity providers publish two keys under one kid while rotating. Tried in the key set's order,
   * one signature check each; a claim failure after a signature verified is that token's answer.
   */
  async function verifyWithEachKey(
    token: string,
    keys: AsyncIterable<VerificationKey>,
    options: JWTVerifyOptions,
  ): Promise<JWTPayload> {
    let tried = 0;
    let lastFailure: unknown;
    for await (const key of keys) {
      if (tried++ > 0) signatureChecks += 1; // the first was counted before the key set was asked
      try {
        return (await jwtVerify(token, key, options)).payload;
      } catch (error) {
        if (String((error as { code?: unknown }).code).startsWith('ERR_JWT_')) throw failureOfJoseError(error);
        lastFailure = error; // this key does not verify it (or cannot): the next one may
      }
    }
    if (lastFailure !== undefined) throw failureOfJoseError(lastFailure);
    throw new AuthFailure('bad_signature', "no key under the token's kid could be used");
  }

  return {
    verify,
    get signatureChecks() {
      return signatureChecks;
    },
  };
}
