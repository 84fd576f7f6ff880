// GET /v2/version from memory: single flight, TTL, stale-if-error, never an error cached.
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { answerJson, startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { closeAfterEach } from '../helpers/per-test.js';
import { eventually } from '../helpers/eventually.js';

const VERSION = {
  version: '3.5.10',
  features: { experimental: {}, userManagement: { supported: true, maxRightsPerUser: 1000, maxUsersPageSize: 1000 } },
};

let upstream: RecordingUpstream | undefined;
let gw: RunningGateway | undefined;
closeAfterEach(
  () => gw,
  () => upstream,
);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const PURGE_TOKEN = 'purge-token-0123456789abcdef';
const purge = { method: 'POST', headers: { authorization: `Bearer ${PURGE_TOKEN}` } };

async function cacheCounts(gateway: RunningGateway): Promise<Record<string, number>> {
  const metric = await gateway.registry.getSingleMetric('ledger_gateway_version_cache_requests_total')!.get();
  return Object.fromEntries(metric.values.map((v) => [String(v.labels.result), v.value]));
}

describe('version cache', () => {
  it('answers 100 concurrent calls on a cold cache with exactly one upstream call', async () => {
    upstream = await startRecordingUpstream((request, response) => {
      setTimeout(() => void answerJson(200, VERSION)(request, response), 500); // a slow participant: the misses overlap
    });
    gw = await startGateway(upstream.url);
    const answers = await Promise.all(
      Array.from({ length: 100 }, () => fetch(`${gw!.url}/v2/version`, { headers: gw!.auth() })),
    );
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));
    const bodies = await Promise.all(answers.map((a) => a.json()));
    expect(bodies.every((b) => JSON.stringify(b) === JSON.stringify(VERSION))).toBe(true);
    expect(upstream.requests).toHaveLength(1);
    // On a loaded machine a few calls may arrive after the answer: those are hits, never upstream calls.
    const counts = await cacheCounts(gw);
    expect(counts.miss).toBe(1);
    expect((counts.coalesced ?? 0) + (counts.hit ?? 0)).toBe(99);
    expect(counts.coalesced).toBeGreaterThan(50);
  });

  it('serves hits within the TTL without the participant, and refreshes after it', async () => {
    upstream = await startRecordingUpstream(answerJson(200, VERSION, { 'x-participant': 'p1' }));
    gw = await startGateway(upstream.url, { versionCache: { ttlSeconds: 1 } });
    const first = await fetch(`${gw.url}/v2/version`, { headers: gw.auth() });
    expect(first.headers.get('x-cache')).toBe('MISS');
    const correlationIds = new Set<string | null>();
    for (let i = 0; i < 5; i++) {
      const hit = await fetch(`${gw.url}/v2/version`, { headers: gw.auth() });
      expect(hit.status).toBe(200);
      expect(hit.headers.get('x-cache')).toBe('HIT');
      expect(hit.headers.get('age')).toMatch(/^[01]$/);
      expect(hit.headers.get('content-type')).toBe('application/json');
      expect(hit.headers.get('x-participant')).toBe('p1');
      correlationIds.add(hit.headers.get('x-request-id')); // the gateway's own headers, per call
      const text = await hit.text();
      expect(Number(hit.headers.get('content-length'))).toBe(Buffer.byteLength(text));
      expect(JSON.parse(text)).toEqual(VERSION);
    }
    expect(correlationIds.size).toBe(5);
    expect(correlationIds.has(null)).toBe(false);
    expect(upstream.requests).toHaveLength(1);
    await sleep(1_100);
    expect((await fetch(`${gw.url}/v2/version`, { headers: gw.auth() })).headers.get('x-cache')).toBe('MISS');
    expect(upstream.requests).toHaveLength(2);
    expect(await cacheCounts(gw)).toEqual({ miss: 2, hit: 5 });
  });

  it("replays the participant's bytes exactly on a hit, whatever they are (UTF-8, and bytes that are not)", async () => {
    // "é", a 4-byte emoji, and a lone 0xff that is not UTF-8 at all: a hit must not re-encode anything.
    const body = Buffer.concat([
      Buffer.from('{"version":"3.5.10","note":"é 🦀 '),
      Buffer.from([0xff, 0xc3]),
      Buffer.from('"}'),
    ]);
    upstream = await startRecordingUpstream((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
      response.end(body);
    });
    gw = await startGateway(upstream.url);
    for (const expected of ['MISS', 'HIT', 'HIT']) {
      const answer = await fetch(`${gw.url}/v2/version`, { headers: gw.auth() });
      expect(answer.headers.get('x-cache')).toBe(expected);
      expect(Number(answer.headers.get('content-length'))).toBe(body.length);
      expect(Buffer.from(await answer.arrayBuffer()).equals(body)).toBe(true);
    }
    expect(upstream.requests).toHaveLength(1);
  });

  it('never stores an error: a 500 goes to the client whole and the next call asks again', async () => {
    const failure = {
      code: 'LEDGER_API_INTERNAL_ERROR',
      cause: 'boom',
      correlationId: null,
      traceId: null,
      context: {},
      resources: [],
      errorCategory: 4,
      grpcCodeValue: 13,
      retryInfo: null,
      definiteAnswer: null,
    };
    upstream = await startRecordingUpstream(answerJson(500, failure));
    gw = await startGateway(upstream.url);
    const refused = await fetch(`${gw.url}/v2/version`, { headers: gw.auth() });
    expect(refused.status).toBe(500);
    expect(await refused.json()).toEqual(failure);
    upstream.respond(answerJson(200, VERSION));
    const ok = await fetch(`${gw.url}/v2/version`, { headers: gw.auth() });
    expect(ok.status).toBe(200);
    expect(upstream.requests).toHaveLength(2);
    const requests = await gw.registry.getSingleMetricAsString('ledger_gateway_requests_total');
    expect(requests).toMatch(/operation="getVersion",method="GET",status="500",error_code="LEDGER_API_INTERNAL_ERROR"/);
  });

  it('serves the last good answer while the participant is down, within staleIfErrorSeconds, then 503', async () => {
    upstream = await startRecordingUpstream(answerJson(200, VERSION));
    gw = await startGateway(upstream.url, { versionCache: { ttlSeconds: 1, staleIfErrorSeconds: 1 } });
    expect((await fetch(`${gw.url}/v2/version`, { headers: gw.auth() })).headers.get('x-cache')).toBe('MISS');
    await upstream.close();
    upstream = undefined;
    await sleep(1_200); // past the TTL, within the stale window
    const stale = await fetch(`${gw.url}/v2/version`, { headers: gw.auth() });
    expect(stale.status).toBe(200);
    expect(stale.headers.get('x-cache')).toBe('STALE');
    expect(await stale.json()).toEqual(VERSION);
    await sleep(1_000); // past the stale window too
    const gone = await fetch(`${gw.url}/v2/version`, { headers: gw.auth() });
    expect(gone.status).toBe(503);
    expect(await gone.json()).toMatchObject({ code: 'GATEWAY_UPSTREAM_UNAVAILABLE' });
    expect(await cacheCounts(gw)).toMatchObject({ miss: 2, stale: 1 });
  });

  it("does not serve stale for a 4xx: the participant's refusal goes through", async () => {
    upstream = await startRecordingUpstream(answerJson(200, VERSION));
    gw = await startGateway(upstream.url, { versionCache: { ttlSeconds: 1, staleIfErrorSeconds: 60 } });
    await fetch(`${gw.url}/v2/version`, { headers: gw.auth() });
    upstream.respond(
      answerJson(403, {
        code: 'NA',
        cause: 'A security-sensitive error has been received',
        errorCategory: -1,
        grpcCodeValue: 7,
      }),
    );
    await sleep(1_100);
    const refused = await fetch(`${gw.url}/v2/version`, { headers: gw.auth() });
    expect(refused.status).toBe(403);
  });

  it("gives a caller that joined another's refresh its own answer, never the other caller's refusal", async () => {
    // The participant refuses bob's token (a user it cannot resolve) and answers alice.
    upstream = await startRecordingUpstream((request, response) => {
      const authorization = request.headers.authorization;
      if (authorization === undefined) return answerJson(200, VERSION)(request, response); // the gateway's readiness probe
      const subject = JSON.parse(Buffer.from(authorization.split('.')[1]!, 'base64url').toString()).sub as string;
      setTimeout(
        () =>
          void (
            subject === 'bob'
              ? answerJson(403, {
                  code: 'NA',
                  cause: 'A security-sensitive error has been received',
                  correlationId: 'bob-call',
                  grpcCodeValue: 7,
                })
              : answerJson(200, VERSION)
          )(request, response),
        subject === 'bob' ? 300 : 0,
      );
    });
    gw = await startGateway(upstream.url);
    const bob = { authorization: `Bearer ${await gw.issuer.mint({ sub: 'bob' })}` };
    const bobs = fetch(`${gw.url}/v2/version`, { headers: bob });
    await eventually(() => upstream!.requests.length === 1, "bob's refresh has reached the participant");
    const alices = fetch(`${gw.url}/v2/version`, { headers: gw.auth() });
    const [bobAnswer, aliceAnswer] = await Promise.all([bobs, alices]);
    expect(bobAnswer.status).toBe(403);
    expect(aliceAnswer.status).toBe(200);
    expect(await aliceAnswer.json()).toEqual(VERSION);
    expect(upstream.requests).toHaveLength(2);
  });

  it('asks for the identity encoding, so that the one answer cached suits every caller; an encoded answer is not stored', async () => {
    // A participant that compresses whatever it may (no Accept-Encoding allows any encoding, RFC 9110 §12.5.3).
    upstream = await startRecordingUpstream((request, response) => {
      const accepts = request.headers['accept-encoding'];
      const body = Buffer.from(JSON.stringify(VERSION));
      if (accepts === 'identity')
        return void response
          .writeHead(200, { 'content-type': 'application/json', 'content-length': body.length })
          .end(body);
      const zipped = gzipSync(body);
      response
        .writeHead(200, {
          'content-type': 'application/json',
          'content-encoding': 'gzip',
          'content-length': zipped.length,
        })
        .end(zipped);
    });
    gw = await startGateway(upstream.url);
    const first = await fetch(`${gw.url}/v2/version`, { headers: gw.auth({ 'accept-encoding': 'gzip, br' }) });
    expect(await first.json()).toEqual(VERSION);
    const called = upstream.requests.filter((request) => request.headers.authorization !== undefined);
    expect(called[0]!.headers['accept-encoding']).toBe('identity');
    const plain = await fetch(`${gw.url}/v2/version`, { headers: gw.auth({ 'accept-encoding': 'identity' }) });
    expect(plain.headers.get('x-cache')).toBe('HIT');
    expect(plain.headers.get('content-encoding')).toBeNull();
    expect(await plain.json()).toEqual(VERSION);
  });

  it('does not store an answer in another encoding, should the participant send one anyway', async () => {
    upstream = await startRecordingUpstream((request, response) => {
      const zipped = gzipSync(Buffer.from(JSON.stringify(VERSION)));
      response
        .writeHead(200, {
          'content-type': 'application/json',
          'content-encoding': 'gzip',
          'content-length': zipped.length,
        })
        .end(zipped);
    });
    gw = await startGateway(upstream.url);
    for (let i = 0; i < 2; i++) {
      const answer = await fetch(`${gw.url}/v2/version`, { headers: gw.auth() });
      expect(answer.headers.get('x-cache')).toBe('MISS'); // passed on as it came, never stored
      expect(await answer.json()).toEqual(VERSION); // fetch decodes the gzip it was told about
    }
  });

  it('answers callers waiting on a refresh that a purge cut short: with the answer it brings, which is not stored', async () => {
    upstream = await startRecordingUpstream((request, response) => {
      setTimeout(
        () => void answerJson(200, VERSION)(request, response),
        request.headers.authorization === undefined ? 0 : 500,
      );
    });
    gw = await startGateway(upstream.url, { admin: { purgeToken: PURGE_TOKEN } });
    const waiting = [1, 2, 3].map(() => fetch(`${gw!.url}/v2/version`, { headers: gw!.auth() }));
    await eventually(
      () => upstream!.requests.length === 1,
      'the refresh the three calls share has reached the participant',
    );
    expect((await fetch(`${gw.adminUrl}/cache/version/purge`, purge)).status).toBe(204);
    for (const answer of await Promise.all(waiting)) {
      expect(answer.status).toBe(200);
      expect(await answer.json()).toEqual(VERSION);
    }
    const after = await fetch(`${gw.url}/v2/version`, { headers: gw.auth() });
    expect(after.headers.get('x-cache')).toBe('MISS'); // the purge held: the answer of the cut refresh was not stored
    const metrics = await gw.registry.getSingleMetricAsString('ledger_gateway_requests_total');
    expect(metrics).not.toMatch(/status="500"/);
  });

  it('tells callers that joined a refresh the participant failed (5xx) so itself, without asking again for each', async () => {
    upstream = await startRecordingUpstream((request, response) => {
      if (request.headers.authorization === undefined) return answerJson(200, VERSION)(request, response); // the readiness probe
      setTimeout(
        () =>
          void answerJson(503, { code: 'SERVICE_NOT_RUNNING', cause: 'down', grpcCodeValue: 14, errorCategory: 1 })(
            request,
            response,
          ),
        300,
      );
    });
    gw = await startGateway(upstream.url);
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => fetch(`${gw!.url}/v2/version`, { headers: gw!.auth() })),
    );
    const bodies = await Promise.all(
      answers.map(async (answer) => ({
        status: answer.status,
        code: ((await answer.json()) as { code: string }).code,
      })),
    );
    expect(bodies.filter((body) => body.code === 'SERVICE_NOT_RUNNING')).toEqual([
      { status: 503, code: 'SERVICE_NOT_RUNNING' },
    ]); // the caller whose refresh it was
    expect(bodies.filter((body) => body.code === 'GATEWAY_UPSTREAM_UNAVAILABLE')).toHaveLength(19);
    expect(upstream.requests.filter((request) => request.headers.authorization !== undefined)).toHaveLength(1);
  });

  it('is emptied by POST /cache/version/purge on the admin listener', async () => {
    upstream = await startRecordingUpstream(answerJson(200, VERSION));
    gw = await startGateway(upstream.url, { admin: { purgeToken: PURGE_TOKEN } });
    await fetch(`${gw.url}/v2/version`, { headers: gw.auth() });
    expect((await fetch(`${gw.adminUrl}/cache/version/purge`, purge)).status).toBe(204);
    expect((await fetch(`${gw.url}/v2/version`, { headers: gw.auth() })).headers.get('x-cache')).toBe('MISS');
    expect(upstream.requests).toHaveLength(2);
  });

  it('still authenticates first: no token gets 401 even with a warm cache', async () => {
    upstream = await startRecordingUpstream(answerJson(200, VERSION));
    gw = await startGateway(upstream.url);
    expect((await fetch(`${gw.url}/v2/version`, { headers: gw.auth() })).status).toBe(200);
    const anonymous = await fetch(`${gw.url}/v2/version`);
    expect(anonymous.status).toBe(401);
    const body = await anonymous.text();
    expect(body).not.toContain('3.5.10');
    expect(JSON.parse(body)).toMatchObject({ code: 'NA', grpcCodeValue: 16, errorCategory: -1 });
    expect((await fetch(`${gw.url}/v2/version`, { headers: { authorization: 'Bearer not.a.token' } })).status).toBe(
      401,
    );
    expect(upstream.requests).toHaveLength(1);
  });

  it('is off with ttlSeconds 0: every call goes upstream', async () => {
    upstream = await startRecordingUpstream(answerJson(200, VERSION));
    gw = await startGateway(upstream.url, { versionCache: { ttlSeconds: 0 } });
    for (let i = 0; i < 3; i++)
      expect((await fetch(`${gw.url}/v2/version`, { headers: gw.auth() })).headers.get('x-cache')).toBeNull();
    expect(upstream.requests).toHaveLength(3);
  });
});

describe('version cache settings on a reload', () => {
  /** The running config with these versionCache settings: what a reloaded file would give. */
  const withTtl = (gateway: RunningGateway, ttlSeconds: number) => () => ({
    ...gateway.config,
    versionCache: { ...gateway.config.versionCache, ttlSeconds },
  });
  const cacheStatus = async (gateway: RunningGateway) => {
    const answer = await fetch(`${gateway.url}/v2/version`, { headers: gateway.auth() });
    expect(answer.status).toBe(200);
    await answer.arrayBuffer();
    return answer.headers.get('x-cache');
  };

  it('turns the cache on and off, and empties it when its TTL changes, without a restart', async () => {
    upstream = await startRecordingUpstream(answerJson(200, VERSION));
    gw = await startGateway(upstream.url, { versionCache: { ttlSeconds: 0 } });
    expect([await cacheStatus(gw), await cacheStatus(gw)]).toEqual([null, null]);
    expect(upstream.requests).toHaveLength(2);

    expect((await gw.gateway.reload(withTtl(gw, 60))).result).toBe('success');
    expect([await cacheStatus(gw), await cacheStatus(gw)]).toEqual(['MISS', 'HIT']);
    expect(upstream.requests).toHaveLength(3);

    // A new TTL: the answer stored under the old one is dropped, the next call asks again.
    expect((await gw.gateway.reload(withTtl(gw, 120))).result).toBe('success');
    expect([await cacheStatus(gw), await cacheStatus(gw)]).toEqual(['MISS', 'HIT']);
    expect(upstream.requests).toHaveLength(4);

    expect((await gw.gateway.reload(withTtl(gw, 0))).result).toBe('success');
    expect([await cacheStatus(gw), await cacheStatus(gw)]).toEqual([null, null]);
    expect(upstream.requests).toHaveLength(6);
  });

  it('keeps a stored answer fresh for the TTL it was fetched under', async () => {
    upstream = await startRecordingUpstream(answerJson(200, VERSION));
    gw = await startGateway(upstream.url, { versionCache: { ttlSeconds: 1 } });
    expect(await cacheStatus(gw)).toBe('MISS');
    await sleep(1_100);
    expect(await cacheStatus(gw)).toBe('MISS'); // past 1 s: stale, fetched again
    expect(upstream.requests).toHaveLength(2);
  });
});
