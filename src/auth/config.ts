// What the schema cannot say about auth: exactly one key source per issuer, algorithms that fit the
// key, no HS256 without unsafeHmacSecret, readable key files, known operation names. Checked once at
// start; every problem is named by its key path in one ConfigError (fail closed: no issuers, no start,
// unless the participant's identity providers are trusted).
import { X509Certificate, createPublicKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { createLocalJWKSet, type JSONWebKeySet, type JWK } from 'jose';
import { ConfigError, type AuthConfig, type IssuerConfig, type JwsAlgorithm } from '../config/schema.js';
import { OPERATION_NAMES, UNKNOWN_OPERATION } from '../operations.js';
import { allowedJwksHostProblem } from './jwks-hosts.js';

/** Canton's jwt-jwks accepts RSA -> RS256, P-256 -> ES256, P-521 -> ES512 (Canton `AuthServiceJWT.scala`, jwt.rst). */
export const DEFAULT_ALGORITHMS: readonly JwsAlgorithm[] = ['RS256', 'ES256', 'ES512'];

export type KeySource =
  | { readonly kind: 'jwksUrl'; readonly url: URL }
  | { readonly kind: 'jwks'; readonly jwks: JSONWebKeySet }
  | { readonly kind: 'publicKey'; readonly key: KeyObject; readonly file: string }
  | { readonly kind: 'hmac'; readonly secret: Uint8Array };

export interface ResolvedIssuer {
  readonly issuer: string;
  readonly source: KeySource;
  readonly algorithms: readonly JwsAlgorithm[];
  readonly audience: string | undefined;
  readonly scope: string | undefined;
}

export interface ResolvedAuth {
  readonly issuers: readonly ResolvedIssuer[];
  readonly publicOperations: ReadonlySet<string>;
  readonly participantId: string | undefined;
  readonly maxTokenLifetimeSeconds: number;
  readonly clockToleranceSeconds: number;
  readonly keySets: AuthConfig['keySets'];
  readonly tokenCache: AuthConfig['tokenCache'];
  /** Loud start-up warnings (unsafe settings in use). */
  readonly warnings: readonly string[];
}

const KEY_SOURCES = ['jwksUrl', 'publicKeyFile', 'jwks', 'unsafeHmacSecret'] as const;

/** The JWS algorithms a public key can verify. */
export function algorithmsForKey(key: KeyObject): JwsAlgorithm[] {
  switch (key.asymmetricKeyType) {
    case 'rsa':
      return ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'];
    case 'rsa-pss':
      return ['PS256', 'PS384', 'PS512'];
    case 'ec': {
      const curve = key.asymmetricKeyDetails?.namedCurve;
      if (curve === 'prime256v1') return ['ES256'];
      if (curve === 'secp384r1') return ['ES384'];
      if (curve === 'secp521r1') return ['ES512'];
      return [];
    }
    case 'ed25519':
      return ['EdDSA', 'Ed25519'];
    default:
      return [];
  }
}

/** The smallest RSA modulus jose verifies with (shorter keys fail every signature check). */
export const MIN_RSA_BITS = 2048;

/** The bit length of an RSA JWK's modulus (`n`, base64url), or undefined for another key or a bad `n`. */
export function rsaModulusBits(jwk: JWK): number | undefined {
  if (jwk.kty !== 'RSA' || typeof jwk.n !== 'string') return undefined;
  const bytes = Buffer.from(jwk.n, 'base64url');
  let start = 0;
  while (start < bytes.length && bytes[start] === 0) start++;
  if (start === bytes.length) return undefined;
  return (bytes.length - start - 1) * 8 + (32 - Math.clz32(bytes[start]!));
}

/** The algorithms a JWK can verify (by kty/crv; an `alg` on the key narrows it). */
function algorithmsForJwk(jwk: JWK): JwsAlgorithm[] {
  let fitting: JwsAlgorithm[];
  if (jwk.kty === 'RSA') fitting = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'];
  else if (jwk.kty === 'EC')
    fitting = jwk.crv === 'P-256' ? ['ES256'] : jwk.crv === 'P-384' ? ['ES384'] : jwk.crv === 'P-521' ? ['ES512'] : [];
  else if (jwk.kty === 'OKP' && jwk.crv === 'Ed25519') fitting = ['EdDSA', 'Ed25519'];
  else fitting = [];
  return typeof jwk.alg === 'string' ? fitting.filter((alg) => alg === jwk.alg) : fitting;
}

function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '');
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1';
}

/** The public key in a PEM file: SPKI public key or X.509 certificate. Never a private key. */
export function readPublicKeyFile(file: string): KeyObject {
  const pem = readFileSync(file, 'utf8');
  if (/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(pem))
    throw new Error('the file holds a private key; give the gateway the public key or certificate only');
  if (pem.includes('-----BEGIN CERTIFICATE-----')) return new X509Certificate(pem).publicKey;
  const key = createPublicKey(pem);
  if (key.type !== 'public') throw new Error('not a public key');
  return key;
}

function resolveIssuer(
  entry: IssuerConfig,
  path: string,
  hmacAllowed: boolean,
  problems: string[],
  warnings: string[],
): ResolvedIssuer | undefined {
  const present = KEY_SOURCES.filter((name) => entry[name] !== undefined);
  if (present.length !== 1) {
    problems.push(
      `${path}: exactly one key source is required, one of ${KEY_SOURCES.join(', ')}${present.length > 1 ? ` (found ${present.join(', ')})` : ''}`,
    );
    return undefined;
  }
  const explicit = entry.algorithms;
  const startProblems = problems.length;
  let source: KeySource | undefined;
  let algorithms: readonly JwsAlgorithm[] = explicit ?? DEFAULT_ALGORITHMS;

  if (entry.unsafeHmacSecret !== undefined) {
    source = { kind: 'hmac', secret: new TextEncoder().encode(entry.unsafeHmacSecret) };
    algorithms = explicit ?? ['HS256'];
    if (algorithms.length !== 1 || algorithms[0] !== 'HS256')
      problems.push(`${path}.algorithms: an unsafeHmacSecret issuer verifies HS256 only`);
    if (!hmacAllowed) {
      problems.push(
        `${path}.unsafeHmacSecret: HS256 shared secrets are for development; refused with a real upstream (set auth.unsafeAllowHmacWithParticipant only for a test participant)`,
      );
    }
    warnings.push(`UNSAFE: issuer ${entry.issuer} verifies HS256 tokens with a shared secret (development only)`);
  } else {
    if (algorithms.includes('HS256')) {
      problems.push(
        `${path}.algorithms: HS256 needs unsafeHmacSecret; an asymmetric key never verifies an HMAC (algorithm confusion)`,
      );
    }
    if (entry.jwksUrl !== undefined) {
      let url: URL | undefined;
      try {
        url = new URL(entry.jwksUrl);
      } catch {
        problems.push(`${path}.jwksUrl: not a URL`);
      }
      if (url !== undefined) {
        if (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopbackHost(url.hostname))) {
          problems.push(
            `${path}.jwksUrl: must be https (http only for a loopback address): keys fetched in the clear can be replaced`,
          );
        } else if (url.username !== '' || url.password !== '') {
          problems.push(`${path}.jwksUrl: must not carry credentials`);
        } else {
          source = { kind: 'jwksUrl', url };
        }
      }
    } else if (entry.publicKeyFile !== undefined) {
      try {
        const key = readPublicKeyFile(entry.publicKeyFile);
        const fitting = algorithmsForKey(key);
        if (fitting.length === 0)
          problems.push(`${path}.publicKeyFile: unsupported key type ${key.asymmetricKeyType ?? 'unknown'}`);
        else if (key.asymmetricKeyType === 'rsa' && (key.asymmetricKeyDetails?.modulusLength ?? 0) < MIN_RSA_BITS)
          problems.push(`${path}.publicKeyFile: RSA keys must be at least ${MIN_RSA_BITS} bits`);
        if (explicit === undefined) {
          algorithms = fitting.includes('RS256') ? ['RS256'] : fitting;
        } else {
          const unfit = explicit.filter((alg) => !fitting.includes(alg));
          if (unfit.length > 0)
            problems.push(
              `${path}.algorithms: ${unfit.join(', ')} do not fit the ${key.asymmetricKeyType ?? ''} key in ${entry.publicKeyFile}`,
            );
        }
        source = { kind: 'publicKey', key, file: entry.publicKeyFile };
      } catch (error) {
        problems.push(
          `${path}.publicKeyFile: cannot read a public key from ${entry.publicKeyFile}: ${(error as Error).message}`,
        );
      }
    } else if (entry.jwks !== undefined) {
      const jwks = entry.jwks as unknown as JSONWebKeySet;
      const kids = new Set<string>();
      jwks.keys.forEach((jwk, index) => {
        const keyPath = `${path}.jwks.keys[${index}]`;
        if ('d' in jwk || jwk.kty === 'oct') problems.push(`${keyPath}: must be a public key`);
        const bits = rsaModulusBits(jwk);
        if (bits !== undefined && bits < MIN_RSA_BITS)
          problems.push(
            `${keyPath}: RSA keys must be at least ${MIN_RSA_BITS} bits (this one has ${bits}): no token signed with it could be verified`,
          );
        if (typeof jwk.kid !== 'string' || jwk.kid === '')
          problems.push(`${keyPath}.kid: required (tokens select their key by kid)`);
        else if (kids.has(jwk.kid)) problems.push(`${keyPath}.kid: duplicate kid ${jwk.kid}`);
        else kids.add(jwk.kid);
      });
      try {
        createLocalJWKSet(jwks);
      } catch (error) {
        problems.push(`${path}.jwks: ${(error as Error).message}`);
      }
      if (explicit !== undefined) {
        const served = new Set(jwks.keys.flatMap(algorithmsForJwk));
        const unfit = explicit.filter((alg) => !served.has(alg));
        if (unfit.length > 0) problems.push(`${path}.algorithms: no key in jwks fits ${unfit.join(', ')}`);
      }
      source = { kind: 'jwks', jwks: structuredClone(jwks) };
    }
  }
  if (source === undefined || problems.length > startProblems) return undefined;
  return { issuer: entry.issuer, source, algorithms: [...algorithms], audience: entry.audience, scope: entry.scope };
}

/**
 * Validate and load the auth section; throws a ConfigError naming every bad key path. upstreamUrl is
 * upstream.url: an HMAC issuer is refused in front of a real participant ("sandbox" is the dev ledger).
 */
export function resolveAuthConfig(auth: AuthConfig, upstreamUrl: string): ResolvedAuth {
  const hmacAllowed = upstreamUrl === 'sandbox' || auth.unsafeAllowHmacWithParticipant;
  const problems: string[] = [];
  const warnings: string[] = [];
  // A participant may trust only the IdPs created through its API: then the list can start empty, and
  // a token is refused as of an unknown issuer until the participant's first list names its issuer.
  if (auth.issuers.length === 0 && !auth.participantIdentityProviders.enabled) {
    problems.push(
      'auth.issuers: at least one issuer is required unless auth.participantIdentityProviders.enabled ' +
        '(with upstream.url "sandbox", an empty list starts the development issuer)',
    );
  }
  const seen = new Map<string, number>();
  const issuers: ResolvedIssuer[] = [];
  auth.issuers.forEach((entry, index) => {
    const path = `auth.issuers[${index}]`;
    const first = seen.get(entry.issuer);
    if (first !== undefined)
      problems.push(`${path}.issuer: duplicate of auth.issuers[${first}].issuer (iss selects one issuer)`);
    else seen.set(entry.issuer, index);
    const resolved = resolveIssuer(entry, path, hmacAllowed, problems, warnings);
    if (resolved !== undefined) issuers.push(resolved);
  });
  auth.participantIdentityProviders.allowedJwksHosts.forEach((entry, index) => {
    const problem = allowedJwksHostProblem(entry);
    if (problem !== undefined)
      problems.push(`auth.participantIdentityProviders.allowedJwksHosts[${index}]: ${problem}`);
  });
  auth.publicOperations.forEach((name, index) => {
    if (name === UNKNOWN_OPERATION.name || !OPERATION_NAMES.includes(name)) {
      problems.push(`auth.publicOperations[${index}]: unknown operation "${name}"`);
    }
  });
  if (auth.unsafeAllowHmacWithParticipant) warnings.push('UNSAFE: auth.unsafeAllowHmacWithParticipant is on');
  if (problems.length > 0) throw new ConfigError('auth', problems);
  return {
    issuers,
    publicOperations: new Set(auth.publicOperations),
    participantId: auth.participantId,
    maxTokenLifetimeSeconds: auth.maxTokenLifetimeSeconds,
    clockToleranceSeconds: auth.clockToleranceSeconds,
    keySets: auth.keySets,
    tokenCache: auth.tokenCache,
    warnings,
  };
}
