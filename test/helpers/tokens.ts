// A test identity provider: an RS256 key pair whose public half the gateway gets as an inline JWKS,
// and tokens minted with it in Canton's audience-based format (Canton `AuthServiceJWTPayload.scala`).
import { exportJWK, generateKeyPair, SignJWT, type JWK, type JWTPayload, type CryptoKey } from 'jose';

export const TEST_ISSUER = 'https://idp.test/realms/ledger';
export const TEST_PARTICIPANT = 'participant1';
export const TEST_AUDIENCE = `https://daml.com/jwt/aud/participant/${TEST_PARTICIPANT}`;

export interface TestIssuer {
  /** The `auth.issuers[]` entry for the gateway's config. */
  readonly issuerConfig: { issuer: string; jwks: { keys: JWK[] } };
  readonly kid: string;
  /** A signed token; claims override the defaults (sub alice, 4-minute lifetime, Canton audience). */
  mint(claims?: JWTPayload, header?: Record<string, unknown>): Promise<string>;
}

export async function createTestIssuer(issuer = TEST_ISSUER, kid = 'test-key-1'): Promise<TestIssuer> {
  const { privateKey, publicKey } = await generateKeyPair('RS256');
  const jwk = { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' };
  return {
    issuerConfig: { issuer, jwks: { keys: [jwk] } },
    kid,
    mint: (claims = {}, header = {}) =>
      signToken(
        privateKey,
        { iss: issuer, sub: 'alice', aud: TEST_AUDIENCE, ...claims },
        { alg: 'RS256', kid, ...header },
      ),
  };
}

async function signToken(key: CryptoKey, claims: JWTPayload, header: Record<string, unknown>): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const jwt = new SignJWT({ exp: now + 240, iat: now, ...claims }).setProtectedHeader(header as { alg: string });
  return jwt.sign(key);
}
