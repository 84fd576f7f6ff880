// Key set faults through the gateway: a JWKS endpoint that is down, slow, answers garbage or an
// empty key set, at start and during traffic. Cached good keys keep working, tokens signed by keys
// the gateway never saw are refused, and /readyz tells the truth.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { TEST_AUDIENCE, TEST_PARTICIPANT } from '../helpers/tokens.js';
import { closeAfterEach } from '../helpers/per-test.js';
import { eventually } from '../helpers/eventually.js';

type Mode = 'good' | 'down' | 'slow' | 'garbage' | 'empty';
const ISSUER = 'https://idp.faulty.test';

interface Key {
  readonly kid: string;
  readonly privateKey: CryptoKey;
  readonly jwk: JWK;
}
async function makeKey(kid: string): Promise<Key> {
  const { privateKey, publicKey } = await generateKeyPair('RS256');
  return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' } };
}
function mint(key: Key): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ sub: 'alice', aud: TEST_AUDIENCE, iat: now, exp: now + 240 })
    .setProtectedHeader({ alg: 'RS256', kid: key.kid })
    .setIssuer(ISSUER)
    .sign(key.privateKey);
}

/** A JWKS endpoint whose behaviour the test switches. */
async function startJwks(keys: Key[], initial: Mode) {
  let mode = initial;
  let fetches = 0;
  const server = http.createServer((_request, response) => {
    fetches += 1;
    switch (mode) {
      case 'down':
        response.socket?.destroy();
        return;
      case 'slow':
        setTimeout(() => response.end(JSON.stringify({ keys: keys.map((k) => k.jwk) })), 5_000);
        return;
      case 'garbage':
        response.writeHead(200, { 'content-type': 'application/json' }).end('<html>not a key set');
        return;
      case 'empty':
        response.writeHead(200, { 'content-type': 'application/json' }).end('{"keys":[]}');
        return;
      default:
        response
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ keys: keys.map((k) => k.jwk) }));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`,
    set(next: Mode) {
      mode = next;
    },
    get fetches() {
      return fetches;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

let upstream: RecordingUpstream | undefined;
let gw: RunningGateway | undefined;
let jwks: Awaited<ReturnType<typeof startJwks>> | undefined;
closeAfterEach(
  () => gw,
  () => upstream,
  () => jwks,
);

const settings = (url: string) => ({
  auth: {
    issuers: [{ issuer: ISSUER, jwksUrl: url }],
    participantId: TEST_PARTICIPANT,
    keySets: { fetchTimeoutMs: 300, unknownKeyCooldownMs: 100, refreshIntervalMs: 400 },
  },
});
const call = (token: string) =>
  fetch(`${gw!.url}/v2/state/ledger-end`, { headers: { authorization: `Bearer ${token}` } });
const readyz = async () => (await fetch(`${gw!.adminUrl}/readyz`)).status;

describe('key set faults', () => {
  for (const mode of ['down', 'slow', 'garbage', 'empty'] as const) {
    it(`at start, a key set that is ${mode}: /readyz 503 and every token refused, until it recovers`, async () => {
      const key = await makeKey('k1');
      jwks = await startJwks([key], mode);
      upstream = await startRecordingUpstream();
      gw = await startGateway(upstream.url, settings(jwks.url));
      await eventually(() => jwks!.fetches >= 1, "the key set's first fetch has reached it");
      expect(await readyz()).toBe(503);
      const refused = await call(await mint(key));
      expect(refused.status).toBe(401);
      expect(await refused.json()).toMatchObject({ code: 'NA', grpcCodeValue: 16 });
      expect(upstream.requests).toHaveLength(0);

      jwks.set('good');
      await expect.poll(readyz, { timeout: 5_000, interval: 100 }).toBe(200);
      expect((await call(await mint(key))).status).toBe(200);
    });
  }

  for (const mode of ['down', 'slow', 'garbage', 'empty'] as const) {
    it(`during traffic, a key set that turns ${mode}: cached keys keep working, unknown keys are refused, /readyz stays 200`, async () => {
      const known = await makeKey('k1');
      const stranger = await makeKey('k2');
      jwks = await startJwks([known], 'good');
      upstream = await startRecordingUpstream();
      gw = await startGateway(upstream.url, settings(jwks.url));
      await expect.poll(readyz, { timeout: 5_000, interval: 100 }).toBe(200);
      expect((await call(await mint(known))).status).toBe(200);

      jwks.set(mode);
      const fetchesBefore = jwks.fetches;
      await eventually(() => jwks!.fetches >= fetchesBefore + 2, 'a few failed refreshes');
      expect(jwks.fetches).toBeGreaterThan(fetchesBefore);
      for (let i = 0; i < 3; i++) expect((await call(await mint(known))).status).toBe(200); // fresh tokens, same key
      const unknown = await call(await mint(stranger));
      expect(unknown.status).toBe(401);
      expect(await readyz()).toBe(200);
      expect(upstream.requests).toHaveLength(4); // the known key's four calls; the stranger's never arrived
    });
  }
});
