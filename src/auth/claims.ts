// Claim checks on a token whose signature is already verified: pure functions mirroring Canton's
// own parsing (Canton `AuthServiceJWTPayload.scala`, `AuthServiceJWT.scala`, `IdentityProviderAwareAuthService.scala`,
// `JwtVerifier.scala` checkTokenLifeTime).
import { AuthFailure } from './failure.js';

export const CANTON_AUDIENCE_PREFIX = 'https://daml.com/jwt/aud/participant/';
export const CANTON_LEDGER_API_SCOPE = 'daml_ledger_api';

export interface ClaimRules {
  /** The issuer's `audience`: aud must contain it (Canton's target-audience / IDP audience). */
  readonly audience?: string | undefined;
  /** The issuer's `scope`: scope/scp must contain it (Canton's target-scope). */
  readonly scope?: string | undefined;
  /** auth.participantId: the participant a Canton audience (or a scope token's aud) must name. */
  readonly participantId?: string | undefined;
  /** 0 = no limit. */
  readonly maxTokenLifetimeSeconds: number;
  readonly clockToleranceSeconds: number;
}

export type Claims = Readonly<Record<string, unknown>>;

/** `aud` as Canton reads it: a string, an array of strings, or absent/null. */
export function audiencesOf(claims: Claims): string[] {
  const aud = claims.aud;
  if (aud === undefined || aud === null) return [];
  if (typeof aud === 'string') return [aud];
  if (Array.isArray(aud) && aud.every((entry) => typeof entry === 'string')) return aud;
  throw new AuthFailure('malformed', 'aud is neither a string nor an array of strings');
}

/** Scopes as Canton reads them: `scope` split on spaces (RFC 8693 §4.2), else `scp` (string or array). */
export function scopesOf(claims: Claims): string[] {
  if (typeof claims.scope === 'string') return claims.scope.split(' ');
  const scp = claims.scp;
  if (scp === undefined || scp === null) return [];
  if (typeof scp === 'string') return [scp];
  if (Array.isArray(scp) && scp.every((entry) => typeof entry === 'string')) return scp;
  throw new AuthFailure('malformed', 'scp is neither a string nor an array of strings');
}

/**
 * How a token was accepted: through an audience (the issuer's, or the participant's own
 * `https://daml.com/jwt/aud/participant/<id>`), or through a scope, which Canton deprecated in 3.5 and
 * removes in 3.7 ("JWTs without any audience specified", Canton `release-notes/3.5.1.md`).
 */
export type TokenKind = 'audience' | 'scope';

/**
 * With an issuer `audience` or `scope`, the token must carry it (both, when both are set: stricter than
 * Canton 3.4, which then ignores the scope). Otherwise Canton's default parsing: audience-based when
 * aud holds exactly one non-empty `https://daml.com/jwt/aud/participant/<id>`, else scope-based when
 * the scopes hold `daml_ledger_api` (aud then empty or one participant id), else refused.
 */
export function checkAudienceAndScope(claims: Claims, rules: ClaimRules): TokenKind {
  // The reasons name the configured value's key, never the value: it may be read from a secret file,
  // and a refusal's reason is logged.
  const audiences = audiencesOf(claims);
  if (rules.audience !== undefined || rules.scope !== undefined) {
    if (rules.audience !== undefined && !audiences.includes(rules.audience)) {
      throw new AuthFailure('audience', "aud does not contain the issuer's audience");
    }
    if (rules.scope !== undefined && !scopesOf(claims).includes(rules.scope)) {
      throw new AuthFailure('scope', "scope does not contain the issuer's scope");
    }
    return rules.audience !== undefined ? 'audience' : 'scope';
  }

  const participantAudiences = audiences.filter((entry) => entry.startsWith(CANTON_AUDIENCE_PREFIX));
  if (participantAudiences.length > 0) {
    const ids = participantAudiences
      .map((entry) => entry.slice(CANTON_AUDIENCE_PREFIX.length))
      .filter((id) => id !== '');
    if (ids.length !== 1)
      throw new AuthFailure('audience', `aud must hold exactly one ${CANTON_AUDIENCE_PREFIX}<participantId>`);
    if (rules.participantId !== undefined && ids[0] !== rules.participantId) {
      throw new AuthFailure('audience', "the token's participant audience is not auth.participantId");
    }
    return 'audience';
  }
  if (scopesOf(claims).includes(CANTON_LEDGER_API_SCOPE)) {
    if (audiences.length > 1)
      throw new AuthFailure('audience', "a scope-based token's aud must be empty or a single participant id");
    if (rules.participantId !== undefined && audiences.length === 1 && audiences[0] !== rules.participantId) {
      throw new AuthFailure('audience', "the scope-based token's aud is not auth.participantId");
    }
    return 'scope';
  }
  throw new AuthFailure(
    'scope',
    `neither a ${CANTON_AUDIENCE_PREFIX}<participantId> audience nor the ${CANTON_LEDGER_API_SCOPE} scope`,
  );
}

/** `sub` is the Ledger API user id: required, a non-empty string. */
export function subjectOf(claims: Claims): string {
  const sub = claims.sub;
  if (typeof sub !== 'string' || sub === '')
    throw new AuthFailure('subject', 'no sub claim: the token names no Ledger API user');
  return sub;
}

/** `exp` in epoch seconds: required (Canton rejects a token without one under max-token-lifetime). */
export function expiryOf(claims: Claims): number {
  const exp = claims.exp;
  if (exp === undefined || exp === null) throw new AuthFailure('no_expiry', 'the token has no exp claim');
  if (typeof exp !== 'number' || !Number.isFinite(exp)) throw new AuthFailure('malformed', 'exp is not a number');
  return exp;
}

/** The same rule as jose's: expired once exp <= now - tolerance. */
export function isExpired(expiresAt: number, nowSeconds: number, clockToleranceSeconds: number): boolean {
  return expiresAt <= nowSeconds - clockToleranceSeconds;
}

/**
 * Canton's checkTokenLifeTime: the remaining lifetime exp - now, not exp - iat, may not exceed the
 * maximum (Canton `JwtVerifier.scala`). The clock tolerance applies here too, so an identity provider whose clock
 * runs a little ahead does not get its maximum-lifetime tokens refused.
 */
export function checkLifetime(expiresAt: number, nowSeconds: number, rules: ClaimRules): void {
  if (
    rules.maxTokenLifetimeSeconds > 0 &&
    expiresAt - nowSeconds > rules.maxTokenLifetimeSeconds + rules.clockToleranceSeconds
  ) {
    throw new AuthFailure(
      'lifetime',
      `the remaining lifetime exceeds auth.maxTokenLifetimeSeconds (${rules.maxTokenLifetimeSeconds} s)`,
    );
  }
}

export interface CheckedClaims {
  readonly subject: string;
  readonly expiresAt: number;
  readonly kind: TokenKind;
}

/** Every claim check after the signature: expiry present, iat, lifetime, audience/scope, subject. */
export function checkClaims(claims: Claims, rules: ClaimRules, nowSeconds: number): CheckedClaims {
  const expiresAt = expiryOf(claims);
  if (isExpired(expiresAt, nowSeconds, rules.clockToleranceSeconds))
    throw new AuthFailure('expired', 'exp is in the past');
  // java-jwt, which Canton verifies with, refuses an iat in the future; jose checks iat only with maxTokenAge.
  if (typeof claims.iat === 'number' && claims.iat > nowSeconds + rules.clockToleranceSeconds)
    throw new AuthFailure('not_yet_valid', 'iat is in the future');
  checkLifetime(expiresAt, nowSeconds, rules);
  const kind = checkAudienceAndScope(claims, rules);
  return { subject: subjectOf(claims), expiresAt, kind };
}
