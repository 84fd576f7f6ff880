// Two gateway replicas sharing one budget through a real Redis (redis-server on a loopback port,
// started here); and what happens when Redis goes away or stops answering: the configured fail
// mode, quickly, never a hang and never a crash. Time bounds are generous for a loaded 2-core machine.
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterEach, expect, it } from 'vitest';
import { limitKeys } from '../../src/protection/redis-store.js';
import { gauge, startGateway, type RunningGateway } from '../helpers/gateway.js';
import { answerJson, startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { createTestIssuer, TEST_PARTICIPANT } from '../helpers/tokens.js';
import { startRedisServer, type RedisServer } from './redis-server.js';
import { describeNeeding } from '../helpers/tool-groups.js';
import { call, startHoldingUpstream, submit, waitFor, type HoldingUpstream } from './support.js';

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => {});
});

async function redisServer(): Promise<RedisServer> {
  const server = await startRedisServer();
  closers.push(() => server.stop());
  return server;
}

/** A plain client to look into Redis, as an operator would. */
function inspect(server: RedisServer): Redis {
  const client = new Redis(server.url, { lazyConnect: false, maxRetriesPerRequest: 1 });
  client.on('error', () => {});
  closers.push(async () => {
    client.disconnect();
  });
  return client;
}

/** Waits (at most 5 s) until Redis holds no concurrency slot, then checks that it holds none. */
async function expectEverySlotReleased(server: RedisServer): Promise<void> {
  const redis = inspect(server);
  const deadline = Date.now() + 5_000;
  while ((await redis.keys('ledger-gateway:slots:*')).length > 0 && Date.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, 20));
  expect(await redis.keys('ledger-gateway:slots:*')).toEqual([]);
}

interface Replica extends RunningGateway {
  readonly logLines: string[];
}

/**
 * One call with the replica's token, answered: the token is verified before a test makes Redis fail
 * (the first call of a new token spends its address's budget in Redis before its admission does).
 */
async function verifyToken(replica: Replica, upstream: HoldingUpstream): Promise<void> {
  const first = submit(replica.url, replica.auth());
  await waitFor(() => upstream.held.length === 1, 'the first call held');
  upstream.answerAll(200);
  expect((await first.answer).status).toBe(200);
}

/** Replicas in front of one upstream, trusting one issuer, sharing one Redis. */
async function replicas(
  count: number,
  upstream: RecordingUpstream,
  protection: Record<string, unknown>,
): Promise<Replica[]> {
  closers.push(() => upstream.close());
  const issuer = await createTestIssuer();
  const started: Replica[] = [];
  for (let i = 0; i < count; i++) {
    const logLines: string[] = [];
    const logger = pino(
      { level: 'warn' },
      new Writable({
        write(chunk, _encoding, done) {
          logLines.push(chunk.toString());
          done();
        },
      }),
    );
    const gateway = await startGateway(
      upstream.url,
      {
        auth: { issuers: [issuer.issuerConfig], participantId: TEST_PARTICIPANT },
        protection,
      },
      { logger },
    );
    closers.push(() => gateway.close());
    const token = await issuer.mint();
    // Every replica trusts the same issuer: tokens minted by it work on all of them.
    started.push(
      Object.assign(gateway, {
        logLines,
        issuer,
        auth: (extra: Record<string, string> = {}) => ({ authorization: `Bearer ${token}`, ...extra }),
      }),
    );
  }
  for (const replica of started) await waitForStore(replica, 1);
  return started;
}

const waitForStore = async (gateway: RunningGateway, up: 0 | 1) => {
  const deadline = Date.now() + 10_000;
  while ((await gauge(gateway, 'ledger_gateway_protection_store_up')) !== up) {
    if (Date.now() > deadline) throw new Error(`store_up did not become ${up}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
};

/** A call and how long it took. */
async function timed(promise: Promise<{ status: number; headers: Record<string, unknown>; body: string }>) {
  const started = performance.now();
  const answer = await promise;
  return { ...answer, ms: performance.now() - started };
}

const BOUND_MS = 3_000;

/**
 * One replica failing open, limiting getV2Parties at `requests` per `perSeconds`, in front of a Redis
 * that is then frozen (SIGSTOP: it keeps its connections and answers nothing). Resume it when done.
 */
async function frozenRedis(commandTimeoutMs: number, requests: number, perSeconds: number) {
  const server = await redisServer();
  const upstream = await startRecordingUpstream(answerJson(200, { partyDetails: [] }));
  const [gateway] = await replicas(1, upstream, {
    failMode: 'open',
    redis: { url: server.url, commandTimeoutMs },
    operations: { getV2Parties: { rate: { requests, perSeconds } } },
  });
  server.pause();
  return { server, a: gateway!, alice: gateway!.auth() };
}

describeNeeding('redis-server')('two replicas and a real Redis', () => {
  it('share one rate budget per principal', async () => {
    const server = await redisServer();
    const upstream = await startRecordingUpstream(answerJson(200, { partyDetails: [] }));
    const [a, b] = await replicas(2, upstream, {
      redis: { url: server.url },
      operations: { getV2Parties: { rate: { requests: 4, perSeconds: 60 } } },
    });
    const alice = a!.auth();

    for (const replica of [a, b, a, b])
      expect((await call(replica!.url, '/v2/parties', alice).answer).status).toBe(200);
    for (const replica of [a, b]) {
      const refused = await call(replica!.url, '/v2/parties', alice).answer;
      expect(refused.status).toBe(429);
      expect(JSON.parse(refused.body)).toMatchObject({
        code: 'GATEWAY_RESOURCE_EXHAUSTED',
        context: { limit: 'rate', operation: 'getV2Parties' },
      });
      // One request per 15 s: the budget is back for one call in at most 15 s.
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(15);
    }
    const bob = { authorization: `Bearer ${await a!.issuer.mint({ sub: 'bob' })}` };
    expect((await call(b!.url, '/v2/parties', bob).answer).status).toBe(200);
    expect(upstream.requests).toHaveLength(5);

    // Redis holds no user id, only hashes.
    const keys = await inspect(server).keys('*');
    expect(keys.length).toBeGreaterThan(0);
    expect(keys.join(' ')).not.toMatch(/alice|bob/);
  });

  it('share concurrency caps, renew the slots of long calls, and leave no slot behind', async () => {
    const server = await redisServer();
    const upstream = await startHoldingUpstream();
    const [a, b] = await replicas(2, upstream, {
      // Renewed every 2 s: a loaded test process (CI) may stall a second or two without losing a slot.
      redis: { url: server.url, leaseMs: 6_000 },
      operations: { submitAndWaitForTransaction: { maxInFlightPerPrincipal: 2 } },
    });
    const alice = a!.auth();
    const held = [submit(a!.url, alice), submit(b!.url, alice)];
    await waitFor(() => upstream.held.length === 2, 'one call held per replica');
    for (const replica of [a, b]) expect((await submit(replica!.url, alice).answer).status).toBe(429);

    // Past the lease: the replicas renew their slots, so the cap still holds.
    await new Promise((resolve) => setTimeout(resolve, 7_000));
    expect((await submit(b!.url, alice).answer).status).toBe(429);

    upstream.answerAll(200);
    expect((await Promise.all(held.map((c) => c.answer))).map((answer) => answer.status)).toEqual([200, 200]);
    await expectEverySlotReleased(server);

    const again = [submit(b!.url, alice), submit(b!.url, alice)];
    await waitFor(() => upstream.held.length === 2, 'both slots free again');
    upstream.answerAll(200);
    await Promise.all(again.map((c) => c.answer));
  }, 40_000);

  it('a call aborted while its admission waits for Redis gives back what it was granted', async () => {
    const server = await redisServer();
    const upstream = await startHoldingUpstream();
    const [a] = await replicas(1, upstream, {
      maxInFlight: 1,
      redis: { url: server.url, commandTimeoutMs: 5_000 },
      operations: { submitAndWaitForTransaction: { maxInFlightPerPrincipal: 1 } },
    });
    const alice = a!.auth();
    await verifyToken(a!, upstream);
    server.pause();
    const aborted = submit(a!.url, alice);
    await new Promise((resolve) => setTimeout(resolve, 200));
    aborted.abort();
    await new Promise((resolve) => setTimeout(resolve, 200));
    server.resume(); // the admission answer arrives now, for a client that is gone

    await expectEverySlotReleased(server);
    // Neither the process-wide slot nor alice's slot leaked: her next call is admitted.
    const next = submit(a!.url, alice);
    await waitFor(() => upstream.held.length === 1, 'the next call admitted');
    expect(upstream.requests).toHaveLength(2); // verifyToken's call and this one: the aborted call never reached it
    upstream.answerAll(200);
    expect((await next.answer).status).toBe(200);
  });

  it('a lease whose replica died does not count; a live one does', async () => {
    const server = await redisServer();
    const upstream = await startHoldingUpstream();
    const [a] = await replicas(1, upstream, {
      redis: { url: server.url },
      operations: { submitAndWaitForTransaction: { maxInFlightPerPrincipal: 1 } },
    });
    const redis = inspect(server);
    const { callerSlots } = limitKeys('ledger-gateway:', 'submitAndWaitForTransaction', 'p:alice');
    const [seconds] = await redis.time();
    const nowMs = Number(seconds) * 1000;

    await redis.zadd(callerSlots, nowMs - 1_000, 'dead-replica:1');
    const admitted = submit(a!.url, a!.auth());
    await waitFor(() => upstream.held.length === 1, 'admitted past the lapsed lease');
    upstream.answerAll(200);
    expect((await admitted.answer).status).toBe(200);

    await redis.zadd(callerSlots, nowMs + 60_000, 'other-replica:1');
    expect((await submit(a!.url, a!.auth()).answer).status).toBe(429);
  });
});

describeNeeding('redis-server')('when Redis goes away', () => {
  it('failMode open: calls pass unchecked and quickly, one warning, a metric, no secret in the log; limits return with Redis', async () => {
    const server = await redisServer();
    const upstream = await startRecordingUpstream(answerJson(200, { partyDetails: [] }));
    const [a, b] = await replicas(2, upstream, {
      failMode: 'open',
      redis: { url: server.url },
      operations: { getV2Parties: { rate: { requests: 1, perSeconds: 60 } } },
    });
    const alice = a!.auth();
    expect((await call(a!.url, '/v2/parties', alice).answer).status).toBe(200);
    expect((await call(b!.url, '/v2/parties', alice).answer).status).toBe(429);

    await server.stop();
    for (let i = 0; i < 6; i++) {
      const answer = await timed(call((i % 2 === 0 ? a : b)!.url, '/v2/parties', alice).answer);
      expect(answer.status).toBe(200);
      expect(answer.ms).toBeLessThan(BOUND_MS);
    }
    for (const replica of [a, b]) {
      expect(await gauge(replica!, 'ledger_gateway_protection_store_failures_total', { fail_mode: 'open' })).toBe(3);
      expect(await gauge(replica!, 'ledger_gateway_protection_store_up')).toBe(0);
      const warnings = replica!.logLines.filter((line) => line.includes('limit store unavailable'));
      expect(warnings).toHaveLength(1); // rate-limited: one line for three failures
      expect(replica!.logLines.join('\n')).not.toContain(server.password);
      expect((await fetch(`${replica!.adminUrl}/livez`)).status).toBe(200);
    }

    await server.start();
    for (const replica of [a, b]) await waitForStore(replica!, 1);
    // The restarted Redis is empty: a fresh budget of one call, shared again.
    expect((await call(b!.url, '/v2/parties', alice).answer).status).toBe(200);
    expect((await call(a!.url, '/v2/parties', alice).answer).status).toBe(429);
  });

  it('failMode closed: 503 GATEWAY_PROTECTION_UNAVAILABLE with Retry-After, quickly; unlimited operations still served; back with Redis', async () => {
    const server = await redisServer();
    const upstream = await startRecordingUpstream(answerJson(200, { partyDetails: [] }));
    const [a, b] = await replicas(2, upstream, {
      failMode: 'closed',
      redis: { url: server.url },
      operations: { getV2Parties: { rate: { requests: 100, perSeconds: 1 } } },
    });
    const alice = a!.auth();
    expect((await call(a!.url, '/v2/parties', alice).answer).status).toBe(200);

    await server.stop();
    for (const replica of [a, b]) {
      const answer = await timed(call(replica!.url, '/v2/parties', alice).answer);
      expect(answer.status).toBe(503);
      expect(answer.ms).toBeLessThan(BOUND_MS);
      expect(answer.headers['retry-after']).toBe('1');
      expect(JSON.parse(answer.body)).toMatchObject({
        code: 'GATEWAY_PROTECTION_UNAVAILABLE',
        errorCategory: 1,
        grpcCodeValue: 14,
        retryInfo: '1 second',
      });
      expect(
        await gauge(replica!, 'ledger_gateway_requests_total', {
          operation: 'getV2Parties',
          status: '503',
          error_code: 'GATEWAY_PROTECTION_UNAVAILABLE',
        }),
      ).toBe(1);
      expect(await gauge(replica!, 'ledger_gateway_protection_store_failures_total', { fail_mode: 'closed' })).toBe(1);
      expect(await gauge(replica!, 'ledger_gateway_protection_store_up')).toBe(0);
      // Readiness does not follow Redis: the operations without limits are still served (below), and
      // every replica turning unready at once would only replace coded 503s by refused connections.
      expect(
        ((await (await fetch(`${replica!.adminUrl}/readyz`)).json()) as { checks: Record<string, string> }).checks,
      ).not.toHaveProperty('protectionStore');
    }
    // An operation without limits never needs Redis.
    expect((await call(a!.url, '/v2/packages', alice).answer).status).toBe(200);
    expect(upstream.requests.map((r) => r.url)).toEqual(['/v2/parties', '/v2/packages']);

    await server.start();
    for (const replica of [a, b]) await waitForStore(replica!, 1);
    for (const replica of [a, b]) expect((await call(replica!.url, '/v2/parties', alice).answer).status).toBe(200);
  });

  it('a Redis that stops answering costs each call at most commandTimeoutMs, then the fail mode applies', async () => {
    const { server, a, alice } = await frozenRedis(200, 100, 1);
    try {
      const answers = await Promise.all(
        Array.from({ length: 5 }, () => timed(call(a.url, '/v2/parties', alice).answer)),
      );
      for (const answer of answers) {
        expect(answer.status).toBe(200);
        expect(answer.ms).toBeLessThan(BOUND_MS);
      }
      expect(await gauge(a, 'ledger_gateway_protection_store_failures_total', { fail_mode: 'open' })).toBe(5);
    } finally {
      server.resume();
    }
    expect((await call(a.url, '/v2/parties', alice).answer).status).toBe(200);
  });

  it('a Redis that holds its connection and answers nothing: after one timeout the fail mode applies at once (nothing more queued for it), and limits return once it answers', async () => {
    const { server, a, alice } = await frozenRedis(1_000, 2, 60);
    try {
      const first = await timed(call(a.url, '/v2/parties', alice).answer);
      expect(first.status).toBe(200);
      expect(first.ms).toBeGreaterThan(900); // it waited out commandTimeoutMs
      const later = await Promise.all(
        Array.from({ length: 20 }, () => timed(call(a.url, '/v2/parties', alice).answer)),
      );
      for (const answer of later) {
        expect(answer.status).toBe(200);
        expect(answer.ms).toBeLessThan(800); // not another commandTimeoutMs (1 s) each: no command was sent
      }
      expect(await gauge(a, 'ledger_gateway_protection_store_failures_total', { fail_mode: 'open' })).toBe(21);
      expect(await gauge(a, 'ledger_gateway_protection_store_up')).toBe(0); // connected, but not answering
    } finally {
      server.resume();
    }
    // Redis answers again: within a probe or two the rate limit (2 a minute) holds once more.
    const deadline = Date.now() + 10_000;
    let status = 0;
    while (status !== 429 && Date.now() < deadline) {
      status = (await call(a.url, '/v2/parties', alice).answer).status;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(status).toBe(429);
  });

  it('an admission that timed out but ran late leaves no slot behind', async () => {
    const server = await redisServer();
    const upstream = await startHoldingUpstream();
    const [a] = await replicas(1, upstream, {
      failMode: 'open',
      redis: { url: server.url, commandTimeoutMs: 200 },
      operations: { submitAndWaitForTransaction: { maxInFlightPerPrincipal: 1 } },
    });
    const alice = a!.auth();
    await verifyToken(a!, upstream);
    server.pause();
    const unchecked = submit(a!.url, alice);
    await waitFor(() => upstream.held.length === 1, 'admitted unchecked');
    upstream.answerAll(200);
    expect((await unchecked.answer).status).toBe(200);
    server.resume(); // Redis now runs the admission script that timed out, then the lease's removal

    await expectEverySlotReleased(server);
    const next = submit(a!.url, alice);
    await waitFor(() => upstream.held.length === 1, 'the next call admitted');
    expect((await submit(a!.url, alice).answer).status).toBe(429);
    upstream.answerAll(200);
    expect((await next.answer).status).toBe(200);
  });
});
