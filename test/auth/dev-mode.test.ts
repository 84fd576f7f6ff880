// Development mode: the sandbox and no issuer -> a development key in .dev/, shared by the gateway
// and `npm run token`; impossible with a real upstream.
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { buildGateway, type Gateway } from '../../src/app.js';
import {
  DEVELOPMENT_ISSUER,
  developmentBanner,
  loadOrCreateDevelopmentKey,
  mintDevelopmentToken,
  prepareAuthentication,
} from '../../src/auth/dev-mode.js';
import { ConfigError, validateGatewayConfig } from '../../src/config/load.js';
import { SANDBOX_SEED } from '../../src/sandbox/seed.js';
import { testConfig } from '../helpers/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { rawRequest } from './support/http.js';
import { closeAfterEach } from '../helpers/per-test.js';

let upstream: RecordingUpstream | undefined;
let gateway: Gateway | undefined;
closeAfterEach(
  () => gateway,
  () => upstream,
);

const directory = () => join(mkdtempSync(join(tmpdir(), 'ledger-gateway-dev-')), '.dev');

describe('development mode', () => {
  it('creates one development key on first use, private to the user and git-ignored', async () => {
    const dir = directory();
    const [a, b] = await Promise.all([loadOrCreateDevelopmentKey(dir), loadOrCreateDevelopmentKey(dir)]);
    expect(a.kid).toBe(b.kid); // two processes starting together agree on one key
    expect((await loadOrCreateDevelopmentKey(dir)).kid).toBe(a.kid);
    expect(statSync(join(dir, 'signing-key.json')).mode & 0o777).toBe(0o600);
    expect(readFileSync(join(dir, '.gitignore'), 'utf8')).toMatch(/^\*$/m);
    expect(a.publicJwk).not.toHaveProperty('d');
  });

  it("with the sandbox and no issuer, trusts the development key: the printed token and npm run token's pass", async () => {
    const dir = directory();
    upstream = await startRecordingUpstream();
    const prepared = await prepareAuthentication(testConfig('sandbox'), dir);
    expect(prepared.config.auth.issuers).toEqual([
      expect.objectContaining({ issuer: DEVELOPMENT_ISSUER, algorithms: ['ES256'] }),
    ]);
    expect(prepared.config.auth.participantId).toBe(SANDBOX_SEED.participantId);
    const printed = prepared.development!.token;
    const minted = await mintDevelopmentToken(await loadOrCreateDevelopmentKey(dir), {
      subject: 'bob',
      participantId: SANDBOX_SEED.participantId,
      lifetimeSeconds: 60,
    });

    // main.ts resolves "sandbox" to the embedded sandbox's URL; here a recording upstream stands in.
    gateway = await buildGateway(prepared.config, {
      upstreamUrl: upstream.url,
      registry: new Registry(),
      logger: false,
    });
    const { api } = await gateway.listen();
    for (const token of [printed, minted]) {
      const response = await rawRequest(api, '/v2/users', { headers: ['Authorization', `Bearer ${token}`] });
      expect(response.status).toBe(200);
    }
    expect((await rawRequest(api, '/v2/users')).status).toBe(401);
    expect(upstream.requests).toHaveLength(2);

    const banner = developmentBanner('http://0.0.0.0:8080', prepared.development!);
    expect(banner).toContain('DEVELOPMENT ONLY');
    expect(banner).toContain(`curl -H "Authorization: Bearer ${printed}" http://127.0.0.1:8080/v2/version`);
  });

  it('cannot start with a real upstream and no issuer: fail closed with a config error', async () => {
    const config = validateGatewayConfig({ upstream: { url: 'http://participant:7575' } });
    await expect(prepareAuthentication(config, directory())).rejects.toThrow(ConfigError);
    await expect(prepareAuthentication(config, directory())).rejects.toThrow(
      /auth\.issuers: at least one issuer is required/,
    );
    await expect(
      buildGateway(config, { upstreamUrl: 'http://participant:7575', registry: new Registry(), logger: false }),
    ).rejects.toThrow(ConfigError);
  });

  it('leaves configured issuers alone with the sandbox (no development key)', async () => {
    const config = testConfig('sandbox', {
      auth: { issuers: [{ issuer: 'https://idp', jwksUrl: 'https://idp/certs' }] },
    });
    const prepared = await prepareAuthentication(config, directory());
    expect(prepared.development).toBeUndefined();
    expect(prepared.config).toBe(config);
  });
});
