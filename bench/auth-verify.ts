// Micro-benchmark (not a test): token verifications per second through the authenticator, for
// RS256 and ES256, with and without the verified-token cache. Run: npx vite-node bench/auth-verify.ts
// (optional argument: milliseconds per measurement, default 1500).
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import { createAuthenticator, type Authenticator } from '../src/auth/authenticator.js';
import { validateGatewayConfig } from '../src/config/load.js';

const ISSUER = 'https://idp.bench';
const DURATION_MS = Number(process.argv[2] ?? 1_500);

async function setUp(
  alg: 'RS256' | 'ES256',
  cached: boolean,
): Promise<{ authenticator: Authenticator; token: string }> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { modulusLength: 2048 });
  const publicJwk = { ...(await exportJWK(publicKey)), kid: `${alg}-bench`, alg };
  const config = validateGatewayConfig({
    upstream: { url: 'http://participant.bench:7575' },
    auth: {
      issuers: [{ issuer: ISSUER, jwks: { keys: [publicJwk] } }],
      participantId: 'participant1',
      tokenCache: cached ? {} : { maxEntries: 0, negativeTtlMs: 0 },
    },
  });
  const now = Math.floor(Date.now() / 1000);
  const token = await new SignJWT({
    sub: 'alice',
    aud: 'https://daml.com/jwt/aud/participant/participant1',
    scope: 'daml_ledger_api',
  })
    .setProtectedHeader({ alg, kid: publicJwk.kid, typ: 'JWT' })
    .setIssuer(ISSUER)
    .setIssuedAt(now)
    .setExpirationTime(now + 290)
    .sign(privateKey);
  return { authenticator: createAuthenticator(config.auth, config.upstream.url), token };
}

async function measure(authenticator: Authenticator, token: string, durationMs: number): Promise<number> {
  let count = 0;
  const deadline = performance.now() + durationMs;
  while (performance.now() < deadline) {
    // Batches keep the clock reads out of the measurement.
    for (let i = 0; i < 50; i++) await authenticator.authenticate(token);
    count += 50;
  }
  return count;
}

const rows: Array<Record<string, string | number>> = [];
for (const alg of ['RS256', 'ES256'] as const) {
  for (const cached of [false, true]) {
    const { authenticator, token } = await setUp(alg, cached);
    await measure(authenticator, token, 200); // warm-up: JIT, key import
    const checksBefore = authenticator.signatureChecks;
    const started = performance.now();
    const count = await measure(authenticator, token, DURATION_MS);
    const seconds = (performance.now() - started) / 1000;
    rows.push({
      algorithm: alg,
      cache: cached ? 'on' : 'off',
      'verifications/s': Math.round(count / seconds),
      'µs each': Number(((seconds * 1e6) / count).toFixed(2)),
      'signature checks': authenticator.signatureChecks - checksBefore,
      calls: count,
    });
    authenticator.close();
  }
}
console.log(`node ${process.version}, ${DURATION_MS} ms per row; a cache hit costs no signature check`);
console.table(rows);
