// The participant's identity providers at the edge (live/participant-idps.ts): a token of an IdP
// created through the gateway is accepted on the next call, refused once the IdP is deactivated, and
// the last known set keeps serving while the participant cannot be listed.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { gauge, startGateway, type RunningGateway } from '../helpers/gateway.js';
import { createTestIssuer, TEST_PARTICIPANT } from '../helpers/tokens.js';
import { startSandbox, type RunningSandbox } from '../sandbox/helpers.js';
import { startJwksServer, type JwksServer } from '../auth/support/jwks-server.js';
import { closeAfterEach } from '../helpers/per-test.js';

// The IdPs' key sets are served on loopback: the participant's IdPs may use it only when allowed.
const LOOPBACK = ['127.0.0.1'];
const NEWCOMER = 'https://newcomer.test/realms/ledger';

let sandbox: RunningSandbox | undefined;
let jwks: JwksServer | undefined;
let running: RunningGateway | undefined;
closeAfterEach(
  () => running,
  () => sandbox,
  () => jwks,
);

async function started(refreshIntervalSeconds: number, fetchTimeoutMs = 300) {
  sandbox = await startSandbox();
  const newcomer = await createTestIssuer(NEWCOMER, 'newcomer-key');
  jwks = await startJwksServer(newcomer.issuerConfig.jwks.keys);
  const admin = await createTestIssuer();
  const tokenFile = join(mkdtempSync(join(tmpdir(), 'idp-token-')), 'token');
  writeFileSync(tokenFile, `${await admin.mint({ sub: 'participant_admin' })}\n`);
  running = await startGateway(sandbox.url, {
    auth: {
      issuers: [admin.issuerConfig],
      participantId: TEST_PARTICIPANT,
      keySets: { fetchTimeoutMs },
      participantIdentityProviders: { enabled: true, refreshIntervalSeconds, tokenFile, allowedJwksHosts: LOOPBACK },
    },
  });
  const gateway = running;
  // The first list (the sandbox's seeded IdP, whose keys cannot be fetched, is left out).
  await expect
    .poll(() => gateway.gateway.readiness.report().checks.participantIdps, { timeout: 10_000, interval: 20 })
    .toBe('ok');
  const adminHeaders = {
    authorization: `Bearer ${await admin.mint({ sub: 'participant_admin' })}`,
    'content-type': 'application/json',
  };
  const idp = {
    identityProviderId: 'newcomer',
    isDeactivated: false,
    issuer: NEWCOMER,
    jwksUrl: jwks.jwksUrl,
    audience: '',
  };
  const token = await newcomer.mint({ sub: 'carol' });
  const call = async () =>
    (await fetch(`${gateway.url}/v2/state/ledger-end`, { headers: { authorization: `Bearer ${token}` } })).status;
  const change = async (method: string, path: string, body?: unknown) => {
    const answer = await fetch(`${gateway.url}${path}`, {
      method,
      headers: adminHeaders,
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    await answer.arrayBuffer();
    return answer.status;
  };
  return { gateway, idp, call, change, tokenFile, mint: (claims: Record<string, unknown>) => newcomer.mint(claims) };
}

describe('identity providers from the participant', () => {
  it('trusts an IdP from the POST through the gateway on, refuses it once deactivated, and drops it when deleted', async () => {
    const { gateway, idp, call, change } = await started(3600);
    expect(await call()).toBe(401);

    expect(await change('POST', '/v2/idps', { identityProviderConfig: idp })).toBe(200);
    expect(await call()).toBe(200); // no restart, no wait

    const deactivate = {
      identityProviderConfig: { ...idp, isDeactivated: true },
      updateMask: { paths: ['is_deactivated'] },
    };
    expect(await change('PATCH', '/v2/idps/newcomer', deactivate)).toBe(200);
    expect(await call()).toBe(401);

    const reactivate = { identityProviderConfig: idp, updateMask: { paths: ['is_deactivated'] } };
    expect(await change('PATCH', '/v2/idps/newcomer', reactivate)).toBe(200);
    expect(await call()).toBe(200);
    expect(await change('DELETE', '/v2/idps/newcomer')).toBe(200);
    expect(await call()).toBe(401);
    expect(
      await gauge(gateway, 'ledger_gateway_participant_idp_refreshes_total', { result: 'success' }),
    ).toBeGreaterThanOrEqual(5);
  });

  it('applies the audience an IdP config sets', async () => {
    const { gateway, idp, call, change, mint } = await started(3600);
    expect(
      await change('POST', '/v2/idps', { identityProviderConfig: { ...idp, audience: 'https://other.audience' } }),
    ).toBe(200);
    expect(await call()).toBe(401); // the token's aud is the participant's, not this IdP's
    const forAudience = await mint({ sub: 'carol', aud: 'https://other.audience' });
    const answer = await fetch(`${gateway.url}/v2/state/ledger-end`, {
      headers: { authorization: `Bearer ${forAudience}` },
    });
    expect(answer.status).toBe(200);
  });

  it('keeps the last known set while the participant cannot be listed, and stays ready', async () => {
    const { gateway, idp, call, change, tokenFile } = await started(1);
    expect(await change('POST', '/v2/idps', { identityProviderConfig: idp })).toBe(200);
    expect(await call()).toBe(200);

    rmSync(tokenFile); // no admin token: the list cannot be fetched
    await expect
      .poll(() => gauge(gateway, 'ledger_gateway_participant_idp_refreshes_total', { result: 'failure' }), {
        timeout: 5_000,
        interval: 100,
      })
      .toBeGreaterThanOrEqual(1);
    expect(await call()).toBe(200);

    await sandbox!.close(); // the participant is down: calls fail upstream, but the token still authenticates
    sandbox = undefined;
    const failures = await gauge(gateway, 'ledger_gateway_participant_idp_refreshes_total', { result: 'failure' });
    await expect
      .poll(() => gauge(gateway, 'ledger_gateway_participant_idp_refreshes_total', { result: 'failure' }), {
        timeout: 5_000,
        interval: 100,
      })
      .toBeGreaterThan(failures);
    expect(await call()).not.toBe(401);
    const readyz = await fetch(`${gateway.adminUrl}/readyz`);
    const report = (await readyz.json()) as { checks: Record<string, string>; details?: Record<string, string> };
    expect(report.checks.participantIdps).toBe('ok');
    expect(report.details?.participantIdps).toMatch(/failed: .*the last known set stays/);
  });
  it('tries an IdP left out because its keys could not be fetched again at the next refresh', async () => {
    const { gateway, idp, call, change } = await started(1);
    jwks!.setBehaviour({ status: 503 }); // the IdP's key set does not answer yet
    expect(await change('POST', '/v2/idps', { identityProviderConfig: idp })).toBe(200);
    expect(await call()).toBe(401); // left out: its keys could not be fetched

    jwks!.setBehaviour({}); // the key set is back; the participant's list has not changed
    await expect.poll(call, { timeout: 10_000, interval: 200 }).toBe(200);
    expect(await gauge(gateway, 'ledger_gateway_participant_idp_refreshes_total', { result: 'failure' })).toBe(0);
  });
  it('holds a change only until a failing key set has failed once, not for the whole fetch bound', async () => {
    // The fetch bound is 8 s; the IdP's key set fails at once (its port refuses connections).
    const { idp, call, change } = await started(60, 8_000);
    await jwks!.close();
    jwks = undefined;
    expect(await change('POST', '/v2/idps', { identityProviderConfig: idp })).toBe(200);
    const before = performance.now();
    expect(await call()).toBe(401); // waited for the change, which left the IdP out
    expect(performance.now() - before).toBeLessThan(4_000);
  }, 30_000);
});
