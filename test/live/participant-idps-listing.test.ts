// How the gateway lists the participant's identity providers (live/participant-idps.ts): its own GET
// /v2/idps, named by its user-agent, with the admin token of tokenFile, to the active replica, with
// exactly upstream.tls (CA, client certificate, server name), bounded in answer size; and with no
// configured issuer at all, trusting only what the participant lists. Then how the section follows a
// reload: turned on, re-timed, turned off (in the reload's own swap, a late list ignored).
// Certificates: test/proxy/fixtures (a test CA; participant.test's certificate; the gateway's client one).
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { buildGateway } from '../../src/app.js';
import { IDP_LIST_MAX_BYTES, IDP_SYNC_USER_AGENT } from '../../src/live/participant-idps.js';
import { validateGatewayConfig } from '../../src/config/load.js';
import { READINESS_USER_AGENT } from '../../src/proxy/upstream-probe.js';
import { gauge, startGateway } from '../helpers/gateway.js';
import { createTestIssuer, TEST_PARTICIPANT, type TestIssuer } from '../helpers/tokens.js';
import { startJwksServer, type JwksServer } from '../auth/support/jwks-server.js';
import { eventually } from '../helpers/eventually.js';

const fixture = (name: string) => new URL(`../proxy/fixtures/${name}`, import.meta.url).pathname;
const read = (name: string) => readFileSync(fixture(name));
const CA = fixture('test-ca.pem');
const CLIENT_TLS = { certFile: fixture('test-client.pem'), keyFile: fixture('test-only-client-key.pem') };
// The IdPs' key sets are served on loopback: the participant's IdPs may use it only when allowed.
const LOOPBACK = ['127.0.0.1'];
const NEWCOMER = 'https://newcomer.test/realms/ledger';
const LEDGER_END = '/v2/state/ledger-end';
const REFRESHES = 'ledger_gateway_participant_idp_refreshes_total';

interface Seen {
  readonly path: string;
  readonly userAgent: string | undefined;
  readonly authorization: string | undefined;
  /** The CN of the client certificate presented, if any. */
  readonly client: string | undefined;
}

/** A participant stand-in (http, or https with `tls`): answers the probe, GET /v2/idps as programmed, and calls. */
interface StandIn {
  readonly url: string;
  /** Everything but the readiness probes. */
  readonly seen: Seen[];
  /** The answer to GET /v2/idps: a list, or a raw answer; `hold` keeps it until released. */
  idps: { configs: unknown[] } | { raw: (response: http.ServerResponse) => void };
  hold: Promise<void> | undefined;
  close(): Promise<void>;
}

async function startStandIn(tls?: https.ServerOptions, port = 0): Promise<StandIn> {
  const standIn: StandIn = {
    url: '',
    seen: [],
    idps: { configs: [] },
    hold: undefined,
    close: async () => undefined,
  };
  const handle = (request: http.IncomingMessage, response: http.ServerResponse) => {
    const userAgent = request.headers['user-agent'];
    if (userAgent === READINESS_USER_AGENT) {
      response.writeHead(200, { 'content-type': 'application/json' }).end('{"version":"3.4.12"}');
      return;
    }
    const peer = tls === undefined ? undefined : (request.socket as TLSSocket).getPeerCertificate();
    standIn.seen.push({
      path: request.url ?? '',
      userAgent,
      authorization: request.headers.authorization,
      client: typeof peer?.subject?.CN === 'string' ? peer.subject.CN : undefined,
    });
    if (request.url !== '/v2/idps') {
      response.writeHead(200, { 'content-type': 'application/json' }).end('{"offset":42}');
      return;
    }
    const answer = () => {
      const idps = standIn.idps;
      if ('raw' in idps) idps.raw(response);
      else
        response
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ identityProviderConfigs: idps.configs, nextPageToken: '' }));
    };
    if (standIn.hold === undefined) answer();
    else void standIn.hold.then(answer);
  };
  const server = tls === undefined ? http.createServer(handle) : https.createServer(tls, handle);
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const scheme = tls === undefined ? 'http' : 'https';
  return Object.assign(standIn, {
    url: `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}

/** A port nothing listens on (a passive replica's Ledger API port refuses connections). */
async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const toClose: Array<{ close(): Promise<unknown> }> = [];
afterEach(async () => {
  for (const resource of toClose.splice(0).reverse()) await resource.close();
});

interface Idp {
  readonly newcomer: TestIssuer;
  readonly jwks: JwksServer;
  /** The IdP config the participant lists for it. */
  readonly config: Record<string, unknown>;
}

async function newcomerIdp(): Promise<Idp> {
  const newcomer = await createTestIssuer(NEWCOMER, 'newcomer-key');
  const jwks = await startJwksServer(newcomer.issuerConfig.jwks.keys);
  toClose.push(jwks);
  const config = { identityProviderId: 'newcomer', isDeactivated: false, issuer: NEWCOMER, jwksUrl: jwks.jwksUrl };
  return { newcomer, jwks, config: { ...config, audience: '' } };
}

function adminTokenFile(token: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'idp-token-')), 'token');
  writeFileSync(file, `${token}\n`);
  return file;
}

/** The participant's IdPs trusted, on top of `auth` (a configured admin issuer unless given). */
async function gatewayTrustingIdps(
  upstreamUrl: string,
  overrides: { auth?: Record<string, unknown>; upstream?: Record<string, unknown> } = {},
) {
  const admin = await createTestIssuer();
  const tokenFile = adminTokenFile(await admin.mint({ sub: 'participant_admin' }));
  const gateway = await startGateway(upstreamUrl, {
    upstream: { timeoutMs: 5_000, readinessIntervalMs: 200, ...overrides.upstream },
    auth: {
      issuers: [admin.issuerConfig],
      participantId: TEST_PARTICIPANT,
      keySets: { fetchTimeoutMs: 2_000 },
      participantIdentityProviders: { enabled: true, refreshIntervalSeconds: 1, tokenFile, allowedJwksHosts: LOOPBACK },
      ...overrides.auth,
    },
  });
  toClose.push(gateway);
  return { gateway, tokenFile };
}

async function readyz(adminUrl: string) {
  const answer = await fetch(`${adminUrl}/readyz`);
  return {
    status: answer.status,
    ...((await answer.json()) as { checks: Record<string, string>; details?: Record<string, string> }),
  };
}

const callWith = async (url: string, token: string) =>
  (await fetch(`${url}${LEDGER_END}`, { headers: { authorization: `Bearer ${token}` } })).status;

describe("the listing of the participant's identity providers", () => {
  it('reaches a participant behind TLS with upstream.tls (CA, client certificate, name), as itself', async () => {
    const idp = await newcomerIdp();
    // Its certificate names participant.test (not 127.0.0.1), and it requires a client certificate of the test CA.
    const participant = await startStandIn({
      cert: read('test-named-participant.pem'),
      key: read('test-only-named-key.pem'),
      ca: read('test-ca.pem'),
      requestCert: true,
      rejectUnauthorized: true,
    });
    toClose.push(participant);
    participant.idps = { configs: [idp.config] };
    const { gateway, tokenFile } = await gatewayTrustingIdps(participant.url, {
      upstream: { tls: { caFile: CA, serverName: 'participant.test', ...CLIENT_TLS } },
    });
    await expect
      .poll(() => gateway.gateway.readiness.report().checks.participantIdps, { timeout: 5_000, interval: 20 })
      .toBe('ok');

    expect(await callWith(gateway.url, await idp.newcomer.mint({ sub: 'carol' }))).toBe(200);
    const listings = participant.seen.filter((seen) => seen.path === '/v2/idps');
    expect(listings.length).toBeGreaterThanOrEqual(1);
    for (const listing of listings)
      expect(listing).toEqual({
        path: '/v2/idps',
        userAgent: IDP_SYNC_USER_AGENT,
        authorization: `Bearer ${readFileSync(tokenFile, 'utf8').trim()}`,
        client: 'ledger-gateway-client',
      });
    // The client's call is the client's: it carries no user-agent of the gateway's own.
    expect(participant.seen.find((seen) => seen.path === LEDGER_END)?.userAgent).not.toBe(IDP_SYNC_USER_AGENT);
    expect(await gauge(gateway, REFRESHES, { result: 'failure' })).toBe(0);
  });

  it('fails the refresh, counted and in /readyz, when the participant certificate is not trusted', async () => {
    const idp = await newcomerIdp();
    const participant = await startStandIn({
      cert: read('test-participant.pem'),
      key: read('test-only-participant-key.pem'),
    });
    toClose.push(participant);
    participant.idps = { configs: [idp.config] };
    const { gateway } = await gatewayTrustingIdps(participant.url); // no upstream.tls.caFile

    await expect
      .poll(() => gauge(gateway, REFRESHES, { result: 'failure' }), { timeout: 5_000, interval: 50 })
      .toBeGreaterThanOrEqual(1);
    const report = await readyz(gateway.adminUrl);
    expect(report.status).toBe(503);
    expect(report.checks.participantIdps).toBe('failing');
    // The cause names the TLS failure, never the URL.
    expect(report.details?.participantIdps).toMatch(
      /^the last refresh \(\w+\) failed: GET \/v2\/idps failed: UNABLE_TO_VERIFY_LEAF_SIGNATURE; the last known set/,
    );
    expect(participant.seen).toEqual([]);
    expect(await callWith(gateway.url, await idp.newcomer.mint({ sub: 'carol' }))).toBe(401);
  });

  it('asks the active replica when the first one is down', async () => {
    const idp = await newcomerIdp();
    const active = await startStandIn();
    toClose.push(active);
    active.idps = { configs: [idp.config] };
    const down = `http://127.0.0.1:${await closedPort()}`;
    const issuer = await createTestIssuer();
    const config = validateGatewayConfig(
      {
        server: { host: '127.0.0.1', port: 0 },
        admin: { host: '127.0.0.1', port: 0 },
        log: { level: 'silent' },
        upstream: { replicas: [down, active.url], readinessIntervalMs: 1_000, timeoutMs: 5_000 },
        auth: {
          issuers: [issuer.issuerConfig],
          participantId: TEST_PARTICIPANT,
          keySets: { fetchTimeoutMs: 2_000 },
          // A long interval: the start's listing itself must find the active replica.
          participantIdentityProviders: { enabled: true, refreshIntervalSeconds: 3_600, allowedJwksHosts: LOOPBACK },
        },
      },
      'test',
    );
    const gateway = await buildGateway(config, {
      upstreamUrl: config.upstream.url,
      registry: new Registry(),
      logger: false,
    });
    toClose.push(gateway);
    const urls = await gateway.listen();

    await expect
      .poll(() => gateway.readiness.report().checks.participantIdps, { timeout: 5_000, interval: 20 })
      .toBe('ok');
    expect(active.seen.filter((seen) => seen.path === '/v2/idps')).toEqual([
      expect.objectContaining({ userAgent: IDP_SYNC_USER_AGENT }),
    ]);
    expect(await callWith(urls.api, await idp.newcomer.mint({ sub: 'carol' }))).toBe(200);
  });

  it(`keeps the last set when the answer is longer than ${IDP_LIST_MAX_BYTES} bytes (declared or not)`, async () => {
    const idp = await newcomerIdp();
    const participant = await startStandIn();
    toClose.push(participant);
    participant.idps = { configs: [idp.config] };
    const { gateway } = await gatewayTrustingIdps(participant.url);
    await expect
      .poll(() => gateway.gateway.readiness.report().checks.participantIdps, { timeout: 5_000, interval: 20 })
      .toBe('ok');
    const token = await idp.newcomer.mint({ sub: 'carol' });
    expect(await callWith(gateway.url, token)).toBe(200);

    // Valid JSON that would deactivate the IdP, padded past the bound: refused whole, so nothing of it applies.
    const deactivated = { identityProviderConfigs: [{ ...idp.config, isDeactivated: true }] };
    const oversized = JSON.stringify(deactivated).replace('{', `{${' '.repeat(IDP_LIST_MAX_BYTES)}`);
    for (const declared of [true, false]) {
      const failures = await gauge(gateway, REFRESHES, { result: 'failure' });
      participant.idps = {
        raw: (response) => {
          response.writeHead(200, {
            'content-type': 'application/json',
            ...(declared && { 'content-length': Buffer.byteLength(oversized) }),
          });
          // Chunked when not declared: the bound is counted as the body arrives.
          for (let at = 0; at < oversized.length; at += 64 * 1024) response.write(oversized.slice(at, at + 64 * 1024));
          response.end();
        },
      };
      await expect
        .poll(() => gauge(gateway, REFRESHES, { result: 'failure' }), { timeout: 5_000, interval: 50 })
        .toBeGreaterThan(failures);
      expect((await readyz(gateway.adminUrl)).details?.participantIdps, `declared: ${declared}`).toMatch(
        new RegExp(`GET /v2/idps failed: the answer is larger than ${IDP_LIST_MAX_BYTES} bytes`),
      );
      expect(await callWith(gateway.url, token), `declared: ${declared}`).toBe(200);
    }
    // The same list within the bound applies: the bound, not the content, kept the last set.
    participant.idps = { configs: deactivated.identityProviderConfigs };
    await expect.poll(() => callWith(gateway.url, token), { timeout: 5_000, interval: 100 }).toBe(401);
  });

  it('starts with no configured issuer and trusts only what the participant lists, once listed', async () => {
    const idp = await newcomerIdp();
    const participant = await startStandIn();
    toClose.push(participant);
    participant.idps = { configs: [idp.config] };
    let release: () => void = () => undefined;
    participant.hold = new Promise<void>((resolve) => (release = resolve));
    const { gateway } = await gatewayTrustingIdps(participant.url, {
      auth: {
        issuers: [],
        keySets: { fetchTimeoutMs: 5_000 }, // the listing is held below for a while
        participantIdentityProviders: { enabled: true, refreshIntervalSeconds: 3_600, allowedJwksHosts: LOOPBACK },
      },
    });
    const token = await idp.newcomer.mint({ sub: 'carol' });

    // Before the first list: refused as a token of an unknown issuer, as the participant would; unready.
    await expect.poll(() => participant.seen.some((seen) => seen.path === '/v2/idps'), { timeout: 5_000 }).toBe(true);
    expect(await callWith(gateway.url, token)).toBe(401);
    expect(await gauge(gateway, 'ledger_gateway_auth_failures_total', { reason: 'unknown_issuer' })).toBe(1);
    const before = await readyz(gateway.adminUrl);
    expect(before.status).toBe(503);
    expect(before.checks).toMatchObject({ keys: 'ok', participantIdps: 'failing' });
    // The listing waits on connections of its own: the readiness probe does not queue behind it.
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect((await readyz(gateway.adminUrl)).checks.upstream).toBe('ok');

    release();
    await expect
      .poll(() => gateway.gateway.readiness.report().checks.participantIdps, { timeout: 5_000, interval: 20 })
      .toBe('ok');
    expect(await callWith(gateway.url, token)).toBe(200);
    expect((await readyz(gateway.adminUrl)).status).toBe(200);
    expect(participant.seen.filter((seen) => seen.path === LEDGER_END)).toHaveLength(1);
  });
});

describe('auth.participantIdentityProviders follows a reload', () => {
  it('starts on a reload turning it on, re-times, and drops the IdPs in the reload turning it off', async () => {
    const idp = await newcomerIdp();
    const participant = await startStandIn();
    toClose.push(participant);
    participant.idps = { configs: [idp.config] };
    const admin = await createTestIssuer();
    const tokenFile = adminTokenFile(await admin.mint({ sub: 'participant_admin' }));
    const gateway = await startGateway(participant.url, {
      upstream: { timeoutMs: 5_000 },
      auth: { issuers: [admin.issuerConfig], participantId: TEST_PARTICIPANT, keySets: { fetchTimeoutMs: 2_000 } },
    });
    toClose.push(gateway);
    const token = await idp.newcomer.mint({ sub: 'carol' });
    const listings = () => participant.seen.filter((seen) => seen.path === '/v2/idps').length;
    const reloadWith = (section: Record<string, unknown>) => {
      const next = structuredClone(gateway.config);
      Object.assign(next.auth.participantIdentityProviders, section);
      return gateway.gateway.reload(() => next, 'test');
    };
    expect(await callWith(gateway.url, token)).toBe(401);
    expect((await readyz(gateway.adminUrl)).checks.participantIdps).toBeUndefined();

    const on = await reloadWith({
      enabled: true,
      refreshIntervalSeconds: 3_600,
      tokenFile,
      allowedJwksHosts: LOOPBACK,
    });
    expect(on).toMatchObject({ result: 'success', restartRequired: [] });
    await expect
      .poll(() => gateway.gateway.readiness.report().checks.participantIdps, { timeout: 5_000, interval: 20 })
      .toBe('ok');
    expect(await callWith(gateway.url, token)).toBe(200);
    expect(participant.seen.find((seen) => seen.path === '/v2/idps')?.authorization).toMatch(/^Bearer /);

    // Re-timed: from once an hour to every second (the reload itself lists once at once).
    const before = listings();
    expect(
      await reloadWith({ enabled: true, refreshIntervalSeconds: 1, tokenFile, allowedJwksHosts: LOOPBACK }),
    ).toMatchObject({
      result: 'success',
    });
    await expect.poll(listings, { timeout: 5_000, interval: 100 }).toBeGreaterThanOrEqual(before + 3);

    const off = await reloadWith({ enabled: false, refreshIntervalSeconds: 1, tokenFile });
    expect(off).toMatchObject({ result: 'success', restartRequired: [] });
    // At once: the participant's issuers left in the reload's own swap.
    expect(await callWith(gateway.url, token)).toBe(401);
    const stopped = listings();
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(listings()).toBe(stopped);
    expect(await callWith(gateway.url, token)).toBe(401);
    const report = await readyz(gateway.adminUrl);
    expect(report.status).toBe(200);
    expect(report.checks.participantIdps).toBe('ok');
  });

  it('ignores a list that was on its way when the reload turning it off ran', async () => {
    const idp = await newcomerIdp();
    const participant = await startStandIn();
    toClose.push(participant);
    participant.idps = { configs: [] };
    const { gateway } = await gatewayTrustingIdps(participant.url, {
      auth: {
        keySets: { fetchTimeoutMs: 3_000 },
        participantIdentityProviders: { enabled: true, refreshIntervalSeconds: 3_600, allowedJwksHosts: LOOPBACK },
      },
    });
    await expect
      .poll(() => gateway.gateway.readiness.report().checks.participantIdps, { timeout: 5_000, interval: 20 })
      .toBe('ok');
    // A configured issuer whose keys come slowly: the reload that adds it waits for them before its swap.
    const slow = await createTestIssuer('https://slow.test', 'slow-key');
    const slowJwks = await startJwksServer(slow.issuerConfig.jwks.keys);
    toClose.push(slowJwks);
    slowJwks.setBehaviour({ delayMs: 1_000 });

    // A listing naming the newcomer, held by the participant; a reload (a new token file) asks for it.
    let release: () => void = () => undefined;
    participant.hold = new Promise<void>((resolve) => (release = resolve));
    participant.idps = { configs: [idp.config] };
    const listings = participant.seen.length;
    const retimed = structuredClone(gateway.config);
    retimed.auth.participantIdentityProviders.tokenFile = adminTokenFile('another-admin-token');
    expect((await gateway.gateway.reload(() => retimed, 'test')).result).toBe('success');
    await expect.poll(() => participant.seen.length, { timeout: 5_000 }).toBeGreaterThan(listings);

    // The reload turning it off waits for the slow keys; the held list arrives meanwhile.
    const off = structuredClone(retimed);
    off.auth.participantIdentityProviders.enabled = false;
    off.auth.issuers.push({ issuer: 'https://slow.test', jwksUrl: slowJwks.jwksUrl });
    const reloaded = gateway.gateway.reload(() => off, 'test');
    await eventually(() => slowJwks.requests >= 1, "the reload is fetching the slow issuer's keys");
    release();
    expect((await reloaded).result).toBe('success');
    slowJwks.setBehaviour({}); // quick again: a late list's swap (its key sets fetched anew) would be done in time
    await new Promise((resolve) => setTimeout(resolve, 750));
    expect(await callWith(gateway.url, await idp.newcomer.mint({ sub: 'carol' }))).toBe(401);
    expect(await callWith(gateway.url, await slow.mint({ sub: 'dave' }))).toBe(200);
  });

  it('refuses a reload that turns it off while auth.issuers is empty: nothing would be trusted', async () => {
    const idp = await newcomerIdp();
    const participant = await startStandIn();
    toClose.push(participant);
    participant.idps = { configs: [idp.config] };
    const { gateway } = await gatewayTrustingIdps(participant.url, {
      auth: {
        issuers: [],
        participantIdentityProviders: { enabled: true, refreshIntervalSeconds: 3_600, allowedJwksHosts: LOOPBACK },
      },
    });
    await expect
      .poll(() => gateway.gateway.readiness.report().checks.participantIdps, { timeout: 5_000, interval: 20 })
      .toBe('ok');
    const next = structuredClone(gateway.config);
    next.auth.participantIdentityProviders.enabled = false;
    const outcome = await gateway.gateway.reload(() => next, 'test');
    expect(outcome.result).toBe('invalid');
    expect(outcome.problems).toEqual([expect.stringMatching(/^auth\.issuers: at least one issuer is required/)]);
    expect(await callWith(gateway.url, await idp.newcomer.mint({ sub: 'carol' }))).toBe(200);
  });
});
