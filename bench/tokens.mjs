// The identity provider of the bench: one RS256 key, its JWKS served over HTTP on loopback (the
// gateway's auth.issuers[0].jwksUrl), its public key as PEM (HAProxy's jwt_verify), and tokens as
// Canton accepts them (`AuthServiceJWTPayload.scala`): audience-based, with sub and an exp within the 300 s limit.
import { createServer } from 'node:http';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { exportJWK, exportSPKI, generateKeyPair, SignJWT } from 'jose';

export const PARTICIPANT_ID = 'participant1';
export const AUDIENCE = `https://daml.com/jwt/aud/participant/${PARTICIPANT_ID}`;
export const USER_ID = 'alice'; // a seeded sandbox user (the WebSocket stream goes to the sandbox)
const KEY_ID = 'bench-rs256';
/** Canton's max-token-lifetime is 300 s; stay under it with room for clock tolerance. */
const LIFETIME_SECONDS = 240;

export async function startIdentityProvider(dir) {
  const { publicKey, privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid: KEY_ID, alg: 'RS256', use: 'sig' };
  const jwks = JSON.stringify({ keys: [jwk] });
  const publicKeyFile = join(dir, 'jwt-public.pem');
  writeFileSync(publicKeyFile, await exportSPKI(publicKey));

  let fetches = 0;
  const server = createServer((request, response) => {
    fetches++;
    response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(jwks) });
    response.end(jwks);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${server.address().port}`;
  const issuer = `${base}/`;

  return {
    issuer,
    jwksUrl: `${base}/.well-known/jwks.json`,
    publicKeyFile,
    get jwksFetches() {
      return fetches;
    },
    /** A fresh token (of USER_ID unless `subject`): every load run gets its own, so none outlives Canton's lifetime limit. */
    mint: (subject = USER_ID) =>
      new SignJWT({})
        .setProtectedHeader({ alg: 'RS256', kid: KEY_ID, typ: 'JWT' })
        .setIssuer(issuer)
        .setSubject(subject)
        .setAudience(AUDIENCE)
        .setIssuedAt()
        .setExpirationTime(Math.floor(Date.now() / 1000) + LIFETIME_SECONDS)
        .sign(privateKey),
    close: () =>
      new Promise((resolve) => {
        server.close(resolve);
        server.closeAllConnections(); // the gateways' keep-alive connections
      }),
  };
}
