// Calls without a verified token, in a real gateway in front of a recording upstream: the per-address
// budget spent before any signature check (in memory, and shared through a real Redis), and the 401
// that closes its connection whichever way it was reached.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { gauge, startGateway, type RunningGateway } from '../helpers/gateway.js';
import { answerJson, startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { createTestIssuer, TEST_PARTICIPANT, type TestIssuer } from '../helpers/tokens.js';
import { startRedisServer } from './redis-server.js';
import { itNeeding } from '../helpers/tool-groups.js';
import { call, type Answer } from './support.js';

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => {});
});

async function upstreamAnswering(): Promise<RecordingUpstream> {
  const upstream = await startRecordingUpstream(answerJson(200, { partyDetails: [] }));
  closers.push(() => upstream.close());
  return upstream;
}

async function gatewayFor(
  upstream: RecordingUpstream,
  overrides: Record<string, unknown>,
  issuer?: TestIssuer,
): Promise<RunningGateway> {
  const withIssuer =
    issuer === undefined
      ? overrides
      : { ...overrides, auth: { issuers: [issuer.issuerConfig], participantId: TEST_PARTICIPANT } };
  const gateway = await startGateway(upstream.url, withIssuer);
  closers.push(() => gateway.close());
  return gateway;
}

/** A token of the gateway's issuer, well formed (its iss, alg and kid) with a made-up signature: it costs a check. */
async function madeUpToken(issuer: TestIssuer): Promise<string> {
  const [header, payload, signature] = (await issuer.mint()).split('.') as [string, string, string];
  return `${header}.${payload}.${randomBytes(Buffer.from(signature, 'base64url').length).toString('base64url')}`;
}

const bearer = (token: string, from?: string) => ({
  authorization: `Bearer ${token}`,
  ...(from === undefined ? {} : { 'x-forwarded-for': from }),
});
const checks = (gateway: RunningGateway) => gauge(gateway, 'ledger_gateway_token_signature_checks_total');
const budgetRefusals = (gateway: RunningGateway) =>
  gauge(gateway, 'ledger_gateway_protection_refusals_total', {
    operation: 'getV2Parties',
    limit: 'unauthenticatedRate',
  });

function expectBudgetRefusal(answer: Answer): void {
  expect(answer.status, answer.body).toBe(429);
  expect(answer.headers['retry-after']).toMatch(/^[1-9]\d*$/);
  expect(JSON.parse(answer.body)).toMatchObject({
    code: 'GATEWAY_RESOURCE_EXHAUSTED',
    errorCategory: 2,
    grpcCodeValue: 8,
    context: { operation: 'getV2Parties', limit: 'unauthenticatedRate' },
    correlationId: answer.headers['x-request-id'],
  });
}

/** One request on a fresh keep-alive connection: what came back, and whether the gateway closed the connection. */
function rawExchange(gateway: RunningGateway, head: string): Promise<{ text: string; closed: boolean }> {
  const { hostname, port } = new URL(gateway.url);
  const socket = net.connect(Number(port), hostname);
  return new Promise((resolve) => {
    let text = '';
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ text, closed: false });
    }, 1_500);
    socket.on('data', (data: Buffer) => {
      text += data.toString('latin1');
    });
    socket.on('error', () => {});
    socket.once('close', () => {
      clearTimeout(timer);
      resolve({ text, closed: true });
    });
    socket.write(head);
  });
}

describe('the 401', () => {
  it('closes the connection after a signature check, as it does when the refusal is known at once', async () => {
    const upstream = await upstreamAnswering();
    const gateway = await gatewayFor(upstream, {});
    const made = await madeUpToken(gateway.issuer);
    const get = (authorization: string) =>
      `GET /v2/parties HTTP/1.1\r\nHost: gw\r\nConnection: keep-alive\r\n${authorization}\r\n`;

    // A new token: verified asynchronously.
    const checked = await rawExchange(gateway, get(`Authorization: Bearer ${made}\r\n`));
    expect(checked.text).toMatch(/^HTTP\/1\.1 401 /);
    expect(checked.text).toMatch(/\r\nconnection: close\r\n/i);
    expect(checked.closed).toBe(true);
    expect(await checks(gateway)).toBe(1);

    for (const authorization of ['', `Authorization: Bearer ${made}\r\n`]) {
      // no token; the refusal the cache remembers
      const atOnce = await rawExchange(gateway, get(authorization));
      expect(atOnce.text).toMatch(/^HTTP\/1\.1 401 /);
      expect(atOnce.text).toMatch(/\r\nconnection: close\r\n/i);
      expect(atOnce.closed).toBe(true);
    }
    expect(await checks(gateway)).toBe(1);
    expect(upstream.requests).toHaveLength(0);
  });
});

describe('the per-address budget of calls without a verified token', () => {
  const budget = (burst: number, refusalDelayMs = 0) => ({
    server: { trustedProxies: ['127.0.0.1'] }, // clients told apart by X-Forwarded-For
    protection: { unauthenticated: { rate: { requests: 1, perSeconds: 60, burst }, refusalDelayMs } },
  });

  it('made-up tokens cost a burst of checks, then 429 without any; verified tokens still pass', async () => {
    const upstream = await upstreamAnswering();
    const gateway = await gatewayFor(upstream, budget(5));
    const flooder = '203.0.113.1';
    // alice's token is verified from another address, before the flood.
    expect(
      (await call(gateway.url, '/v2/parties', bearer(await gateway.issuer.mint(), '203.0.113.2')).answer).status,
    ).toBe(200);
    const aliceToken = gateway.auth().authorization!.slice('Bearer '.length);
    expect((await call(gateway.url, '/v2/parties', bearer(aliceToken, '203.0.113.2')).answer).status).toBe(200);
    const checksBefore = await checks(gateway);

    const answers: Answer[] = [];
    for (let i = 0; i < 30; i++)
      answers.push(await call(gateway.url, '/v2/parties', bearer(await madeUpToken(gateway.issuer), flooder)).answer);
    expect(answers.slice(0, 5).map((a) => a.status)).toEqual([401, 401, 401, 401, 401]);
    for (const answer of answers.slice(5)) expectBudgetRefusal(answer);
    expect(Number(answers[5]!.headers['retry-after'])).toBeGreaterThanOrEqual(55); // one call a minute
    expect((await checks(gateway)) - checksBefore).toBe(5);
    expect(await budgetRefusals(gateway)).toBe(25);

    // A token already verified spends nothing, from the flooding address too.
    for (let i = 0; i < 3; i++)
      expect((await call(gateway.url, '/v2/parties', bearer(aliceToken, flooder)).answer).status).toBe(200);
    // A new token from the flooding address waits for its budget; from another address it is checked.
    const bob = await gateway.issuer.mint({ sub: 'bob' });
    expectBudgetRefusal(await call(gateway.url, '/v2/parties', bearer(bob, flooder)).answer);
    expect((await call(gateway.url, '/v2/parties', bearer(bob, '203.0.113.3')).answer).status).toBe(200);
    expect((await checks(gateway)) - checksBefore).toBe(6);
    expect(upstream.requests).toHaveLength(6); // alice's five calls and bob's
  });

  it('without it (rate: null), every made-up token costs a signature check', async () => {
    const upstream = await upstreamAnswering();
    const gateway = await gatewayFor(upstream, { protection: { unauthenticated: { rate: null } } });
    for (let i = 0; i < 12; i++)
      expect((await call(gateway.url, '/v2/parties', bearer(await madeUpToken(gateway.issuer))).answer).status).toBe(
        401,
      );
    expect(await checks(gateway)).toBe(12);
  });

  it('a new token that proves valid gives its unit back: only refusals count', async () => {
    const upstream = await upstreamAnswering();
    const gateway = await gatewayFor(upstream, budget(3));
    const from = '203.0.113.8';
    for (let i = 0; i < 10; i++) {
      const token = await gateway.issuer.mint({ sub: `user-${i}` });
      expect((await call(gateway.url, '/v2/parties', bearer(token, from)).answer).status).toBe(200);
    }
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      statuses.push(
        (await call(gateway.url, '/v2/parties', bearer(await madeUpToken(gateway.issuer), from)).answer).status,
      );
    }
    expect(statuses).toEqual([401, 401, 401, 429, 429]);
    expect(await checks(gateway)).toBe(13);
  });

  it('calls without any token spend it too: over budget they get 429 instead of 401', async () => {
    const upstream = await upstreamAnswering();
    const gateway = await gatewayFor(upstream, budget(3));
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++)
      statuses.push((await call(gateway.url, '/v2/parties', { 'x-forwarded-for': '203.0.113.9' }).answer).status);
    expect(statuses).toEqual([401, 401, 401, 429, 429]);
    expect(await gauge(gateway, 'ledger_gateway_auth_failures_total', { reason: 'missing' })).toBe(3);
  });

  it('WebSocket upgrades spend it as calls do', async () => {
    const upstream = await upstreamAnswering();
    const gateway = await gatewayFor(upstream, budget(2));
    const upgrade = async (token: string) =>
      new Promise<number>((resolve, reject) => {
        const socket = new WebSocket(
          `${gateway.url.replace('http', 'ws')}/v2/updates`,
          [`jwt.token.${token}`, 'daml.ws.auth'],
          { headers: { 'x-forwarded-for': '203.0.113.4' } },
        );
        socket.once('unexpected-response', (_request, response) => {
          response.resume();
          resolve(response.statusCode ?? 0);
        });
        socket.once('open', () => reject(new Error('upgraded')));
        socket.once('error', () => {});
      });
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push(await upgrade(await madeUpToken(gateway.issuer)));
    expect(statuses).toEqual([401, 401, 429, 429]);
    expect(await checks(gateway)).toBe(2);
    expect(
      await gauge(gateway, 'ledger_gateway_protection_refusals_total', {
        operation: 'onV2Updates',
        limit: 'unauthenticatedRate',
      }),
    ).toBe(2);
  });

  itNeeding(
    'redis-server',
    'is shared by replicas through Redis, and kept by each replica alone while Redis is away',
    async () => {
      const redis = await startRedisServer();
      closers.push(() => redis.stop());
      const upstream = await upstreamAnswering();
      const issuer = await createTestIssuer();
      const settings = {
        ...budget(4),
        protection: { ...budget(4).protection, redis: { url: redis.url, commandTimeoutMs: 500 } },
      };
      const [a, b] = [await gatewayFor(upstream, settings, issuer), await gatewayFor(upstream, settings, issuer)];
      for (const replica of [a, b])
        await expect.poll(() => gauge(replica, 'ledger_gateway_protection_store_up'), { timeout: 10_000 }).toBe(1);
      // New valid tokens give their units back in Redis too: six of them leave the budget of four whole.
      for (const replica of [a, b, a, b, a, b]) {
        const token = await issuer.mint({ sub: `user-${Math.random()}` });
        expect((await call(replica.url, '/v2/parties', bearer(token, '203.0.113.5')).answer).status).toBe(200);
      }
      const statuses: number[] = [];
      for (const replica of [a, b, a, b, a, b])
        statuses.push(
          (await call(replica.url, '/v2/parties', bearer(await madeUpToken(issuer), '203.0.113.5')).answer).status,
        );
      expect(statuses).toEqual([401, 401, 401, 401, 429, 429]);
      expect((await checks(a)) + (await checks(b))).toBe(6 + 4); // the valid tokens and four made-up ones

      await redis.stop();
      for (const replica of [a, b])
        await expect.poll(() => gauge(replica, 'ledger_gateway_protection_store_up'), { timeout: 10_000 }).toBe(0);
      // Each replica counts this address from a full burst of its own: bounded still.
      for (const replica of [a, b]) {
        const local: number[] = [];
        for (let i = 0; i < 6; i++)
          local.push(
            (await call(replica.url, '/v2/parties', bearer(await madeUpToken(issuer), '203.0.113.5')).answer).status,
          );
        expect(local).toEqual([401, 401, 401, 401, 429, 429]);
      }
      expect((await checks(a)) + (await checks(b))).toBe(6 + 4 + 8);
    },
  );

  it('tells clients apart by an X-Forwarded-For hop written with a port, and a NAT64 address whole', async () => {
    const upstream = await upstreamAnswering();
    const gateway = await gatewayFor(upstream, budget(1));
    const once = async (from: string) =>
      (await call(gateway.url, '/v2/parties', bearer(await madeUpToken(gateway.issuer), from)).answer).status;
    // Each client's burst of one: a second client, written with a port, is not the first one.
    expect(await once('203.0.113.21:40001')).toBe(401);
    expect(await once('203.0.113.22:40002')).toBe(401);
    expect(await once('[2001:db8:1::1]:40003')).toBe(401);
    expect(await once('64:ff9b::a01:203')).toBe(401);
    expect(await once('64:ff9b::a01:204')).toBe(401);
    // ...while the same client, however its hop is written, is over its budget.
    expect(await once('203.0.113.21')).toBe(429);
    expect(await once('[2001:db8:1::2]')).toBe(429);
    expect(await once('64:ff9b::10.1.2.3')).toBe(429);
  });

  it('holds a refusal refusalDelayMs before answering it, one per connection at a time', async () => {
    const upstream = await upstreamAnswering();
    const gateway = await gatewayFor(upstream, budget(1, 1_500));
    const from = '203.0.113.6';
    expect((await call(gateway.url, '/v2/parties', { 'x-forwarded-for': from }).answer).status).toBe(401);

    let started = Date.now();
    expectBudgetRefusal(await call(gateway.url, '/v2/parties', bearer(await madeUpToken(gateway.issuer), from)).answer);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_450);

    // Two calls pipelined on one connection: a pipelined call is dispatched in its turn
    // (server/pipelining.ts), so each refusal is held in turn, one at a time.
    const pipelined = `GET /v2/parties HTTP/1.1\r\nHost: gw\r\nX-Forwarded-For: ${from}\r\n\r\n`.repeat(2);
    started = Date.now();
    const { hostname, port } = new URL(gateway.url);
    const socket = net.connect(Number(port), hostname);
    closers.push(async () => {
      socket.destroy();
    });
    let text = '';
    socket.on('data', (data: Buffer) => {
      text += data.toString('latin1');
    });
    socket.write(pipelined);
    await expect.poll(() => text.match(/HTTP\/1\.1 429 /g)?.length ?? 0, { timeout: 10_000 }).toBe(2);
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(2 * 1_450);

    // A client that leaves while its refusal is held: nothing breaks, the next call is answered.
    const leaving = call(gateway.url, '/v2/parties', { 'x-forwarded-for': from });
    await new Promise((resolve) => setTimeout(resolve, 200));
    leaving.abort();
    await new Promise((resolve) => setTimeout(resolve, 1_600));
    const aliceToken = gateway.auth().authorization!.slice('Bearer '.length);
    expect((await call(gateway.url, '/v2/parties', bearer(aliceToken, '203.0.113.7')).answer).status).toBe(200);
    expect(await budgetRefusals(gateway)).toBe(4);
  });
});
