// Signing keys and tokens for the auth tests: real keys, real signatures (jose).
import { randomUUID } from 'node:crypto';
import { SignJWT, exportJWK, exportSPKI, generateKeyPair, type CryptoKey, type JWK, type JWTPayload } from 'jose';
import { CANTON_AUDIENCE_PREFIX } from '../../../src/auth/claims.js';

export type AsymmetricAlgorithm = 'RS256' | 'ES256' | 'ES512';

export interface SigningKey {
  readonly kid: string;
  readonly alg: AsymmetricAlgorithm;
  readonly privateKey: CryptoKey;
  readonly publicJwk: JWK;
  readonly publicPem: string;
}

export async function signingKey(
  alg: AsymmetricAlgorithm,
  kid: string = `${alg.toLowerCase()}-${randomUUID().slice(0, 8)}`,
): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true, modulusLength: 2048 });
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  return { kid, alg, privateKey, publicJwk, publicPem: await exportSPKI(publicKey) };
}

export const nowSeconds = (): number => Math.floor(Date.now() / 1000);

export const participantAudience = (participantId: string): string => `${CANTON_AUDIENCE_PREFIX}${participantId}`;

/** A token with sensible defaults (Canton audience for participant1, 60 s lifetime) and overrides. */
export async function sign(
  key: SigningKey,
  claims: JWTPayload & Record<string, unknown> = {},
  header: Record<string, unknown> = {},
): Promise<string> {
  const now = nowSeconds();
  const payload: Record<string, unknown> = {
    sub: 'alice',
    aud: participantAudience('participant1'),
    iat: now,
    exp: now + 60,
    ...claims,
  };
  for (const [name, value] of Object.entries(payload)) if (value === undefined) delete payload[name];
  const protectedHeader: Record<string, unknown> = { alg: key.alg, kid: key.kid, typ: 'JWT', ...header };
  for (const [name, value] of Object.entries(protectedHeader)) if (value === undefined) delete protectedHeader[name];
  return new SignJWT(payload).setProtectedHeader(protectedHeader as { alg: string }).sign(key.privateKey);
}

const b64 = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');

/** An unsecured JWT (RFC 7519 §6): alg none, empty signature. */
export function unsignedToken(header: Record<string, unknown>, payload: Record<string, unknown>): string {
  return `${b64(header)}.${b64(payload)}.`;
}

/** The same token with its payload replaced and the original signature kept. */
export function tamperedPayload(token: string, changes: Record<string, unknown>): string {
  const [header, payload, signature] = token.split('.');
  const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString()) as Record<string, unknown>;
  return `${header}.${b64({ ...claims, ...changes })}.${signature}`;
}

/** The algorithm-confusion attack: HS256 with the issuer's public RSA key (PEM) as the HMAC secret. */
export async function hs256WithPublicKey(
  key: SigningKey,
  claims: JWTPayload & Record<string, unknown>,
): Promise<string> {
  const now = nowSeconds();
  return new SignJWT({ sub: 'alice', aud: participantAudience('participant1'), iat: now, exp: now + 60, ...claims })
    .setProtectedHeader({ alg: 'HS256', kid: key.kid, typ: 'JWT' })
    .sign(new TextEncoder().encode(key.publicPem));
}
