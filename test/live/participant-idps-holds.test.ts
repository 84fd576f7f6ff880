// What a change of the participant's identity providers may hold (issue 32, §1): nothing one request
// does may hold other callers. A change arms its refresh only once the participant answered it with
// success (never for a body still arriving, never for a caller it refused); while the refresh runs,
// only the tokens it can change wait. And the participant's IdPs are built within bounds: the
// jwksUrl host rule, the cap on how many are built, the backoff on one whose keys keep failing.
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { gauge, startGateway, type RunningGateway } from '../helpers/gateway.js';
import { createTestIssuer, TEST_PARTICIPANT, type TestIssuer } from '../helpers/tokens.js';
import { startJwksServer } from '../auth/support/jwks-server.js';
import { eventually } from '../helpers/eventually.js';

const LOOPBACK = ['127.0.0.1'];
const LEDGER_END = '/v2/state/ledger-end';
const REFRESHES = 'ledger_gateway_participant_idp_refreshes_total';
const LEFT_OUT = 'ledger_gateway_participant_idps_left_out';

const toClose: Array<{ close(): Promise<unknown> | void }> = [];
afterEach(async () => {
  for (const resource of toClose.splice(0).reverse()) await resource.close();
});

/** A participant stand-in: lists `configs`, answers a change with `changeStatus` after `changeDelayMs`, 200 to the rest. */
interface StandIn {
  readonly url: string;
  configs: unknown[];
  changeStatus: number;
  changeDelayMs: number;
  /** On a successful POST /v2/idps, the listed config is added. */
  listings: number;
}

async function startStandIn(): Promise<StandIn> {
  const standIn = { url: '', configs: [] as unknown[], changeStatus: 200, changeDelayMs: 0, listings: 0 };
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const json = (status: number, body: unknown) =>
        response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      if (request.method === 'GET' && request.url === '/v2/idps') {
        standIn.listings++;
        json(200, { identityProviderConfigs: standIn.configs, nextPageToken: '' });
      } else if (request.url?.startsWith('/v2/idps')) {
        setTimeout(() => {
          if (standIn.changeStatus === 200 && request.method === 'POST')
            standIn.configs.push(
              (JSON.parse(Buffer.concat(chunks).toString()) as { identityProviderConfig: unknown })
                .identityProviderConfig,
            );
          json(standIn.changeStatus, standIn.changeStatus === 200 ? {} : { code: 'NA', cause: 'denied' });
        }, standIn.changeDelayMs);
      } else json(200, { offset: 42 });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  toClose.push({
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
  return Object.assign(standIn, { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
}

async function gatewayFor(
  standIn: StandIn,
  section: Record<string, unknown> = {},
  fetchTimeoutMs = 2_000,
): Promise<{ gateway: RunningGateway; configured: TestIssuer }> {
  const configured = await createTestIssuer();
  const gateway = await startGateway(standIn.url, {
    upstream: { timeoutMs: 30_000 },
    auth: {
      issuers: [configured.issuerConfig],
      participantId: TEST_PARTICIPANT,
      keySets: { fetchTimeoutMs },
      participantIdentityProviders: {
        enabled: true,
        refreshIntervalSeconds: 3_600,
        allowedJwksHosts: LOOPBACK,
        ...section,
      },
    },
  });
  toClose.push(gateway);
  await expect
    .poll(() => gateway.gateway.readiness.report().checks.participantIdps, { timeout: 10_000, interval: 20 })
    .toBe('ok');
  return { gateway, configured };
}

const callWith = async (url: string, token: string, signal?: AbortSignal) => {
  const answer = await fetch(`${url}${LEDGER_END}`, { headers: { authorization: `Bearer ${token}` }, signal });
  await answer.arrayBuffer();
  return answer.status;
};

/** Calls answered in `windowMs` by four closed loops (each call bounded by `windowMs` + 2 s). */
async function callsAnswered(url: string, token: string, windowMs: number): Promise<number> {
  const end = performance.now() + windowMs;
  let answered = 0;
  const loop = async () => {
    while (performance.now() < end) {
      try {
        const status = await callWith(url, token, AbortSignal.timeout(windowMs + 2_000));
        if (status === 200 && performance.now() <= end) answered++;
      } catch {
        return; // held past the bound: the window is over for this loop
      }
    }
  };
  await Promise.all([loop(), loop(), loop(), loop()]);
  return answered;
}

/** A PATCH /v2/idps/x that declares 100 bytes of body and sends 26: the socket, to be destroyed. */
async function unfinishedPatch(gatewayUrl: string, token: string): Promise<net.Socket> {
  const { hostname, port } = new URL(gatewayUrl);
  const socket = net.connect(Number(port), hostname);
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(
    `PATCH /v2/idps/x HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${token}\r\n` +
      `Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"identityProviderConfig":`,
  );
  socket.on('error', () => undefined);
  return socket;
}

describe('a change of the participant identity providers holds no other caller', () => {
  it("an unfinished PATCH from a token without admin rights leaves another user's throughput as it was", async () => {
    const standIn = await startStandIn();
    const { gateway, configured } = await gatewayFor(standIn);
    const other = await configured.mint({ sub: 'bob' });
    expect(await callWith(gateway.url, other)).toBe(200);
    const without = await callsAnswered(gateway.url, other, 1_000);

    const patch = await unfinishedPatch(gateway.url, await configured.mint({ sub: 'mallory' }));
    toClose.push({ close: () => void patch.destroy() });
    await eventually(
      async () =>
        (await gauge(gateway, 'ledger_gateway_inflight_requests', { operation: 'updateIdentityProviderConfig' })) === 1,
      'the PATCH has entered the gateway',
    );
    const during = await callsAnswered(gateway.url, other, 1_000);
    const ratio = during / without;
    console.log(
      `calls answered in 1 s: ${without} without, ${during} during the unfinished PATCH (ratio ${ratio.toFixed(2)})`,
    );
    expect(without).toBeGreaterThanOrEqual(5);
    expect(ratio).toBeGreaterThan(0.1); // held, it is 0: every call waits for the PATCH's end (30 s or more)
    expect(standIn.listings).toBe(1); // nothing was refreshed for it
  }, 30_000);

  it('a PATCH the participant refuses (403) arms nothing: no caller waits while it runs, no refresh follows', async () => {
    const standIn = await startStandIn();
    const { gateway, configured } = await gatewayFor(standIn);
    standIn.changeStatus = 403;
    standIn.changeDelayMs = 1_500; // the participant takes its time to refuse
    const patched = fetch(`${gateway.url}/v2/idps/x`, {
      method: 'PATCH',
      headers: {
        authorization: `Bearer ${await configured.mint({ sub: 'mallory' })}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({
        identityProviderConfig: { identityProviderId: 'x', isDeactivated: true, issuer: '', jwksUrl: '', audience: '' },
        updateMask: { paths: ['is_deactivated'] },
      }),
    });
    await new Promise((resolve) => setTimeout(resolve, 200)); // with the participant now
    const newcomer = await createTestIssuer('https://not-yet-known.test', 'k');
    for (const token of [await configured.mint({ sub: 'bob' }), await newcomer.mint({ sub: 'carol' })]) {
      const before = performance.now();
      await callWith(gateway.url, token, AbortSignal.timeout(5_000));
      expect(performance.now() - before).toBeLessThan(700);
    }
    expect((await patched).status).toBe(403);
    expect(await gauge(gateway, REFRESHES, { result: 'success' })).toBe(1); // the start's listing alone
    expect(standIn.listings).toBe(1);
  }, 30_000);

  it("a new IdP whose jwksUrl does not answer holds only its own tokens, not a configured issuer's", async () => {
    const standIn = await startStandIn();
    // A JWKS host that accepts connections and never answers.
    const silent = net.createServer(() => undefined);
    const sockets = new Set<net.Socket>();
    silent.on('connection', (socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    toClose.push({
      close: () =>
        new Promise<void>((resolve) => {
          for (const socket of sockets) socket.destroy();
          silent.close(() => resolve());
        }),
    });
    const fetchTimeoutMs = 3_000;
    const { gateway, configured } = await gatewayFor(standIn, {}, fetchTimeoutMs);
    const newcomer = await createTestIssuer('https://silent.test', 'k');
    const created = await fetch(`${gateway.url}/v2/idps`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${await configured.mint({ sub: 'admin' })}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({
        identityProviderConfig: {
          identityProviderId: 'silent',
          isDeactivated: false,
          issuer: 'https://silent.test',
          jwksUrl: `http://127.0.0.1:${(silent.address() as AddressInfo).port}/jwks`,
          audience: '',
        },
      }),
    });
    expect(created.status).toBe(200);
    const before = performance.now();
    expect(await callWith(gateway.url, await configured.mint({ sub: 'bob' }))).toBe(200);
    const configuredMs = performance.now() - before;
    console.log(
      `configured issuer's call during the refresh: ${configuredMs.toFixed(0)} ms (fetch bound ${fetchTimeoutMs} ms)`,
    );
    expect(configuredMs).toBeLessThan(1_000);
    // The new IdP's own token waits for its key set, which fails: refused, within the bound.
    expect(await callWith(gateway.url, await newcomer.mint({ sub: 'carol' }), AbortSignal.timeout(15_000))).toBe(401);
  }, 30_000);
});

describe("the participant's IdPs are built within bounds", () => {
  it('refuses a jwksUrl on loopback unless allowed, and builds at most maxIdentityProviders', async () => {
    const issuers = await Promise.all([1, 2, 3, 4, 5].map((n) => createTestIssuer(`https://idp${n}.test`, `k${n}`)));
    const jwks = await startJwksServer(issuers.flatMap((issuer) => issuer.issuerConfig.jwks.keys));
    toClose.push(jwks);
    const standIn = await startStandIn();
    standIn.configs = issuers.map((issuer, index) => ({
      identityProviderId: `idp${index + 1}`,
      isDeactivated: false,
      issuer: issuer.issuerConfig.issuer,
      jwksUrl: jwks.jwksUrl,
      audience: '',
    }));
    const statuses = async (url: string) =>
      Promise.all(issuers.map(async (issuer) => callWith(url, await issuer.mint({ sub: 'carol' }))));

    // Not allowed: every one refused by the rule, none fetched.
    const refusing = await gatewayFor(standIn, { allowedJwksHosts: [] });
    expect(await statuses(refusing.gateway.url)).toEqual([401, 401, 401, 401, 401]);
    expect(await gauge(refusing.gateway, LEFT_OUT, { reason: 'rule' })).toBe(5);
    expect(jwks.requests).toBe(0);

    // Allowed, with a cap of 2: the first two built, three left out and counted.
    const capped = await gatewayFor(standIn, { maxIdentityProviders: 2 });
    expect(await statuses(capped.gateway.url)).toEqual([200, 200, 401, 401, 401]);
    expect(await gauge(capped.gateway, LEFT_OUT, { reason: 'cap' })).toBe(3);
    expect(await gauge(capped.gateway, LEFT_OUT, { reason: 'rule' })).toBe(0);
  }, 30_000);

  it('backs off an IdP whose keys keep failing: fetched a few times over many refreshes, not at each', async () => {
    const failing = await createTestIssuer('https://failing.test', 'k');
    const jwks = await startJwksServer(failing.issuerConfig.jwks.keys);
    toClose.push(jwks);
    jwks.setBehaviour({ status: 503 });
    const standIn = await startStandIn();
    standIn.configs = [
      {
        identityProviderId: 'failing',
        isDeactivated: false,
        issuer: 'https://failing.test',
        jwksUrl: jwks.jwksUrl,
        audience: '',
      },
    ];
    const { gateway } = await gatewayFor(standIn, { refreshIntervalSeconds: 1 });
    await expect
      .poll(() => gauge(gateway, REFRESHES, { result: 'success' }), { timeout: 15_000, interval: 100 })
      .toBeGreaterThanOrEqual(8);
    const refreshes = await gauge(gateway, REFRESHES, { result: 'success' });
    console.log(`key set fetches of the failing IdP over ${refreshes} refreshes: ${jwks.requests}`);
    // Tried at the start, then after 1, 2, 4 s...: at most one more try than doublings of the interval.
    expect(jwks.requests).toBeGreaterThanOrEqual(2);
    expect(jwks.requests).toBeLessThanOrEqual(Math.ceil(Math.log2(refreshes)) + 2);
    expect(await gauge(gateway, LEFT_OUT, { reason: 'keys' })).toBe(1);

    // Back: tried again when its wait is over (bounded by the waits doubled so far), then trusted.
    jwks.setBehaviour({});
    await expect
      .poll(async () => callWith(gateway.url, await failing.mint({ sub: 'carol' })), { timeout: 15_000, interval: 200 })
      .toBe(200);
  }, 40_000);
});
