// The gateway refuses every hostile token with Canton's redacted 401 before the participant sees
// anything; good tokens pass with their Authorization header unchanged.
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { startJwksServer, type JwksServer } from './support/jwks-server.js';
import {
  hs256WithPublicKey,
  nowSeconds,
  participantAudience,
  sign,
  signingKey,
  tamperedPayload,
  unsignedToken,
  type SigningKey,
} from './support/keys.js';
import { logCapture } from '../helpers/log-capture.js';
import { rawRequest } from './support/http.js';
import { closeAfterEach } from '../helpers/per-test.js';

const ISSUER = 'https://idp.example.com/realms/ledger';
const ISSUER_WITH_AUDIENCE = 'https://idp.example.com/realms/audience';
const ISSUER_WITH_SCOPE = 'https://idp.example.com/realms/scope';
const TARGET_AUDIENCE = 'https://ledger.example.com/api';
const TARGET_SCOPE = 'ledger-gateway';

let rsa: SigningKey;
let ec: SigningKey;
let ec512: SigningKey;
let stranger: SigningKey;
beforeAll(async () => {
  [rsa, ec, ec512, stranger] = await Promise.all([
    signingKey('RS256'),
    signingKey('ES256'),
    signingKey('ES512'),
    signingKey('ES256'),
  ]);
});

let upstream: RecordingUpstream;
let jwks: JwksServer;
let gw: RunningGateway;
let logs: ReturnType<typeof logCapture>;

beforeEach(async () => {
  upstream = await startRecordingUpstream();
  jwks = await startJwksServer([rsa.publicJwk, ec.publicJwk, ec512.publicJwk]);
  logs = logCapture();
  gw = await startGateway(
    upstream.url,
    {
      auth: {
        issuers: [
          { issuer: ISSUER, jwksUrl: jwks.jwksUrl },
          { issuer: ISSUER_WITH_AUDIENCE, jwksUrl: jwks.jwksUrl, audience: TARGET_AUDIENCE },
          { issuer: ISSUER_WITH_SCOPE, jwksUrl: jwks.jwksUrl, scope: TARGET_SCOPE },
        ],
        participantId: 'participant1',
      },
    },
    { logger: logs.logger },
  );
  await expect.poll(() => gw.gateway.readiness.report().checks.keys, { timeout: 5_000 }).toBe('ok');
});

closeAfterEach(
  () => gw,
  () => upstream,
  () => jwks,
);

const bearer = (token: string) => ['Authorization', `Bearer ${token}`];

interface HostileCase {
  readonly name: string;
  readonly reason: string;
  /** Request headers (and optionally a path) built from fresh tokens. */
  readonly request: () => Promise<{ headers: string[]; path?: string }>;
}

const cases: HostileCase[] = [
  { name: 'no Authorization header', reason: 'missing', request: async () => ({ headers: [] }) },
  {
    name: 'a wrong scheme',
    reason: 'missing',
    request: async () => ({ headers: ['Authorization', `Basic ${Buffer.from('alice:pw').toString('base64')}`] }),
  },
  { name: 'an empty token', reason: 'malformed', request: async () => ({ headers: ['Authorization', 'Bearer '] }) },
  { name: 'garbage', reason: 'malformed', request: async () => ({ headers: bearer('garbage.garbage.garbage') }) },
  {
    name: 'alg none',
    reason: 'algorithm',
    request: async () => ({
      headers: bearer(
        unsignedToken(
          { alg: 'none', typ: 'JWT' },
          { iss: ISSUER, sub: 'alice', aud: participantAudience('participant1'), exp: nowSeconds() + 60 },
        ),
      ),
    }),
  },
  {
    name: 'HS256 signed with the RSA public key',
    reason: 'algorithm',
    request: async () => ({ headers: bearer(await hs256WithPublicKey(rsa, { iss: ISSUER })) }),
  },
  {
    name: 'a tampered payload',
    reason: 'bad_signature',
    request: async () => ({
      headers: bearer(tamperedPayload(await sign(rsa, { iss: ISSUER }), { sub: 'participant_admin' })),
    }),
  },
  {
    name: 'an expired token',
    reason: 'expired',
    request: async () => ({
      headers: bearer(await sign(ec, { iss: ISSUER, iat: nowSeconds() - 120, exp: nowSeconds() - 60 })),
    }),
  },
  {
    name: 'nbf in the future',
    reason: 'not_yet_valid',
    request: async () => ({
      headers: bearer(await sign(ec, { iss: ISSUER, nbf: nowSeconds() + 120, exp: nowSeconds() + 200 })),
    }),
  },
  {
    name: 'an unknown iss',
    reason: 'unknown_issuer',
    request: async () => ({ headers: bearer(await sign(ec, { iss: 'https://evil.example.com' })) }),
  },
  { name: 'no iss', reason: 'unknown_issuer', request: async () => ({ headers: bearer(await sign(ec, {})) }) },
  {
    name: 'an unknown kid',
    reason: 'unknown_key',
    request: async () => ({ headers: bearer(await sign(stranger, { iss: ISSUER })) }),
  },
  {
    name: 'no kid with a JWKS issuer',
    reason: 'unknown_key',
    request: async () => ({ headers: bearer(await sign(ec, { iss: ISSUER }, { kid: undefined })) }),
  },
  {
    name: 'a wrong audience',
    reason: 'audience',
    request: async () => ({
      headers: bearer(await sign(ec, { iss: ISSUER_WITH_AUDIENCE, aud: 'https://other.example.com' })),
    }),
  },
  {
    name: 'a wrong participant id',
    reason: 'audience',
    request: async () => ({
      headers: bearer(await sign(ec, { iss: ISSUER, aud: participantAudience('participant2') })),
    }),
  },
  {
    name: 'a missing scope',
    reason: 'scope',
    request: async () => ({ headers: bearer(await sign(ec, { iss: ISSUER_WITH_SCOPE, scope: 'openid profile' })) }),
  },
  {
    name: 'neither a Canton audience nor the ledger scope',
    reason: 'scope',
    request: async () => ({ headers: bearer(await sign(ec, { iss: ISSUER, aud: 'https://other.example.com' })) }),
  },
  {
    name: 'a lifetime over the limit',
    reason: 'lifetime',
    request: async () => ({ headers: bearer(await sign(rsa, { iss: ISSUER, exp: nowSeconds() + 3_600 })) }),
  },
  {
    name: 'no exp',
    reason: 'no_expiry',
    request: async () => ({ headers: bearer(await sign(rsa, { iss: ISSUER, exp: undefined })) }),
  },
  {
    name: 'no sub',
    reason: 'subject',
    request: async () => ({ headers: bearer(await sign(rsa, { iss: ISSUER, sub: undefined })) }),
  },
  {
    name: 'a token only in the query string',
    reason: 'missing',
    request: async () => ({ headers: [], path: `/v2/users?access_token=${await sign(rsa, { iss: ISSUER })}` }),
  },
  {
    name: 'two Authorization headers',
    reason: 'malformed',
    request: async () => ({
      headers: [
        ...bearer(await sign(rsa, { iss: ISSUER })),
        ...bearer(await sign(ec, { iss: ISSUER, sub: 'participant_admin' })),
      ],
    }),
  },
];

describe('hostile tokens', () => {
  it.each(cases)('refuses $name with 401 ($reason), before the participant sees it', async ({ reason, request }) => {
    const { headers, path } = await request();
    const response = await rawRequest(gw.url, path ?? '/v2/commands/submit-and-wait-for-transaction', {
      method: path ? 'GET' : 'POST',
      headers,
      body: path ? undefined : '{"commands":{}}',
    });

    expect(response.status).toBe(401);
    expect(response.headers['content-type']).toMatch(/^application\/json/);
    expect(response.headers['www-authenticate']).toBe(reason === 'missing' ? 'Bearer' : 'Bearer error="invalid_token"');
    const correlationId = response.headers['x-request-id'];
    expect(response.json()).toEqual({
      code: 'NA',
      cause: 'A security-sensitive error has been received',
      correlationId,
      traceId: null,
      context: {},
      resources: [],
      errorCategory: -1,
      grpcCodeValue: 16,
      retryInfo: null,
      definiteAnswer: null,
    });
    expect(upstream.requests).toEqual([]);

    // The precise reason is in the log line with the correlation id; the token never is.
    const refusal = await logs.requestLine(correlationId as string);
    expect(refusal.reason).toMatch(new RegExp(`^${reason}\\b`));
    const token = headers.find((value) => value.startsWith('Bearer '))?.slice(7) ?? path?.split('access_token=')[1];
    if (token !== undefined && token.length > 10)
      expect(logs.lines.join('\n')).not.toContain(token.split('.')[2] || token.split('.')[1]);
    expect(await gw.registry.metrics()).toMatch(
      new RegExp(`ledger_gateway_auth_failures_total\\{reason="${reason}"\\} 1\\b`),
    );
  });
});

describe('good tokens', () => {
  it.each([
    ['RS256, Canton audience', () => sign(rsa, { iss: ISSUER })],
    ['ES256, Canton audience', () => sign(ec, { iss: ISSUER })],
    ['ES512, Canton audience', () => sign(ec512, { iss: ISSUER })],
    ['scope-based', () => sign(ec, { iss: ISSUER, aud: undefined, scope: 'openid daml_ledger_api' })],
    ['issuer audience', () => sign(rsa, { iss: ISSUER_WITH_AUDIENCE, aud: ['x', TARGET_AUDIENCE] })],
    ['issuer scope', () => sign(rsa, { iss: ISSUER_WITH_SCOPE, aud: undefined, scp: [TARGET_SCOPE] })],
  ])('forwards %s with the Authorization header unchanged', async (_name, token) => {
    const value = `Bearer ${await token()}`;
    // A route without request rules: its body streams through untouched.
    const body = '{"updateId":"1220ab","updateFormat":{}}';
    const response = await rawRequest(gw.url, '/v2/updates/update-by-id', {
      method: 'POST',
      headers: ['Authorization', value],
      body,
    });
    expect(response.status).toBe(200);
    expect(upstream.requests).toHaveLength(1);
    expect(upstream.requests[0]!.headers.authorization).toBe(value);
    expect(upstream.requests[0]!.body.toString()).toBe(body);
  });
});

describe('public operations', () => {
  it('GET /v2/version needs a token by default, and none when listed in auth.publicOperations', async () => {
    expect((await rawRequest(gw.url, '/v2/version')).status).toBe(401);
    expect(upstream.requests).toEqual([]);
    await gw.close();

    gw = await startGateway(upstream.url, {
      auth: { issuers: [{ issuer: ISSUER, jwksUrl: jwks.jwksUrl }], publicOperations: ['getVersion'] },
    });
    const response = await rawRequest(gw.url, '/v2/version');
    expect(response.status).toBe(200);
    expect(upstream.requests.map((r) => r.url)).toEqual(['/v2/version']);
    expect((await rawRequest(gw.url, '/v2/users')).status).toBe(401);
  });
});
