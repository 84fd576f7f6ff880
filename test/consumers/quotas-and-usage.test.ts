// Quotas and usage against real gateways: the quota of a consumer counted per operation with the
// RateLimit fields on every answer and a coded 429 once spent; exact across two replicas sharing a
// real Redis, and kept across a restart; the usage report (JSON, CSV) summing to the calls made;
// gateway keys in Redis, a revocation refused by both replicas within a second.
import { describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { closeAfterEach } from '../helpers/per-test.js';
import { describeNeeding } from '../helpers/tool-groups.js';
import { rawRequest } from '../auth/support/http.js';
import { createTestIssuer, TEST_PARTICIPANT, type TestIssuer } from '../helpers/tokens.js';
import { startRedisServer, type RedisServer } from '../protection/redis-server.js';
import { putRedisKey } from '../../src/consumers/key-redis.js';
import { openRedisConnection } from '../../src/protection/redis-connection.js';
import { consumersWithKeyFile, keyFilePath, ledgerEnd, newKey, writeKeys } from './support.js';
import { echoOnce, startWebSocketUpstream, type WebSocketUpstream } from '../helpers/websocket-upstream.js';
import { eventually } from '../helpers/eventually.js';

const ADMIN_TOKEN = 'admin-token-for-usage-tests';
let upstream: RecordingUpstream | undefined;
const gateways: RunningGateway[] = [];
let redis: RedisServer | undefined;
let wsUpstream: WebSocketUpstream | undefined;
closeAfterEach(
  () => wsUpstream,
  () => ({ close: async () => void (await Promise.all(gateways.splice(0).map((gateway) => gateway.close()))) }),
  () => {
    const closing = upstream;
    upstream = undefined;
    return closing;
  },
  () => redis && { close: () => redis!.stop() },
);

const quotas = { default: { perDay: 3, perMonth: 100 } };

let issuer: TestIssuer | undefined;
/** A gateway in front of the test's upstream; the replicas of a test trust one issuer. */
async function replica(consumers: Record<string, unknown>, protection: Record<string, unknown> = {}) {
  upstream ??= await startRecordingUpstream();
  if (gateways.length === 0) issuer = await createTestIssuer();
  const auth = { issuers: [issuer!.issuerConfig], participantId: TEST_PARTICIPANT };
  const gateway = await startGateway(upstream.url, { consumers, protection, auth, admin: { purgeToken: ADMIN_TOKEN } });
  gateways.push(gateway);
  return gateway;
}

const usage = (gateway: RunningGateway, query = '') =>
  rawRequest(gateway.adminUrl, `/usage${query}`, { headers: ['authorization', `Bearer ${ADMIN_TOKEN}`] });

describe('quotas and usage, in memory', () => {
  it('counts a consumer by token claims, tells what is left, refuses the call past the quota with a coded 429', async () => {
    const gateway = await replica({ list: [{ name: 'alice-app', match: { tokens: [{ sub: 'alice' }] }, quotas }] });
    const answers = [];
    const token = `Bearer ${await issuer!.mint()}`;
    for (let i = 0; i < 4; i++) answers.push(await ledgerEnd(gateway.url, token));
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 429]);
    expect(answers[0]!.headers['ratelimit-policy']).toMatch(/^"day";q=3;w=86400, "month";q=100;w=\d+$/);
    expect(answers[2]!.headers.ratelimit).toMatch(/^"day";r=0;t=\d+, "month";r=97;t=\d+$/);
    const refused = answers[3]!;
    expect(refused.json()).toMatchObject({
      code: 'GATEWAY_QUOTA_EXHAUSTED',
      context: { consumer: 'alice-app', operation: 'getV2StateLedger-end', period: 'day' },
    });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(refused.headers.ratelimit).toMatch(/^"day";r=0;/);
    expect(upstream!.requests).toHaveLength(3);

    const report = (await usage(gateway)).json() as { source: string; rows: Array<Record<string, unknown>> };
    expect(report.source).toBe('memory');
    expect(report.rows).toEqual([
      expect.objectContaining({
        consumer: 'alice-app',
        operation: 'getV2StateLedger-end',
        calls: 4,
        refused: 1,
        failed: 0,
      }),
    ]);
    const csv = await usage(gateway, '?format=csv');
    expect(csv.headers['content-type']).toMatch(/^text\/csv/);
    expect(csv.text.split('\r\n')[0]).toBe(
      'day,consumer,operation,calls,refused,failed,requestBytes,responseBytes,durationMs',
    );
    expect(csv.text).toMatch(/,alice-app,getV2StateLedger-end,4,1,0,/);
    expect((await rawRequest(gateway.adminUrl, '/usage')).status).toBe(403);
    expect((await usage(gateway, '?from=yesterday')).status).toBe(400);
  });

  it('counts callers no consumer claims as one, unmapped', async () => {
    const gateway = await replica({ list: [{ name: 'other', match: { tokens: [{ sub: 'bob' }] } }] });
    const token = `Bearer ${await issuer!.mint()}`;
    for (let i = 0; i < 2; i++) expect((await ledgerEnd(gateway.url, token)).status).toBe(200);
    expect((await ledgerEnd(gateway.url, 'Bearer nonsense')).status).toBe(401);
    const { rows } = (await usage(gateway)).json() as { rows: Array<Record<string, unknown>> };
    expect(rows).toEqual([expect.objectContaining({ consumer: 'unmapped', calls: 3, refused: 1 })]);
  });
});

describeNeeding('redis-server')('quotas, usage and gateway keys shared through Redis', () => {
  it("keeps a quota exact across two replicas and a restart, and reports every replica's usage", async () => {
    redis = await startRedisServer();
    const protection = { redis: { url: redis.url } };
    const consumers = { list: [{ name: 'alice-app', match: { tokens: [{ sub: 'alice' }] }, quotas }] };
    const [first, second] = [await replica(consumers, protection), await replica(consumers, protection)];
    const token = `Bearer ${await issuer!.mint()}`;
    const ok = async (gateway: RunningGateway) => (await ledgerEnd(gateway.url, token)).status;
    // The connection opens in the background: wait until the shared count answers.
    await expect
      .poll(async () => (await ledgerEnd(first.url, token)).headers['ratelimit'], { timeout: 5_000 })
      .toBeDefined();
    expect(await ok(second)).toBe(200);
    await first.close();
    gateways.splice(0, 1);
    const restarted = await replica(consumers, protection);
    // Its connection opens in the background too: a call before it is not counted (fail open, no header).
    const counted = async (gateway: RunningGateway) => {
      const answer = await ledgerEnd(gateway.url, token);
      return answer.headers['ratelimit'] === undefined ? 'not counted' : answer.status;
    };
    await expect.poll(() => counted(restarted), { timeout: 5_000 }).toBe(200); // the third of the day
    expect(await ok(second)).toBe(429);
    expect(await ok(restarted)).toBe(429);
    // Every replica's counts reach Redis within a second: the report of either replica sums them.
    const aliceCalls = async (gateway: RunningGateway) => {
      const report = (await usage(gateway)).json() as { source: string; rows: Array<Record<string, unknown>> };
      expect(report.source).toBe('redis');
      return report.rows
        .filter((row) => row.consumer === 'alice-app')
        .reduce((sum, row) => sum + (row.calls as number), 0);
    };
    const made = upstream!.requests.length + 2; // forwarded, and the two refusals
    await expect.poll(() => aliceCalls(second), { timeout: 3_000 }).toBe(made);
    expect(await aliceCalls(restarted)).toBe(made);
  });

  it('refuses a revoked key on every replica within a second', async () => {
    redis = await startRedisServer();
    const protection = { redis: { url: redis.url } };
    const { key, record } = newKey('payments');
    const client = openRedisConnection({
      url: redis.url,
      commandTimeoutMs: 1_000,
      connectTimeoutMs: 2_000,
      maxReplyBytes: 1024 * 1024,
    });
    await new Promise((resolve) => client.once('ready', resolve));
    try {
      await putRedisKey(client, 'ledger-gateway:', record);
      const consumers = { list: [{ name: 'payments' }], keys: { store: 'redis', refreshIntervalMs: 500 } };
      const replicas = [await replica(consumers, protection), await replica(consumers, protection)];
      for (const gateway of replicas)
        await expect
          .poll(async () => (await ledgerEnd(gateway.url, `Bearer ${key}`)).status, { timeout: 5_000 })
          .toBe(200);
      await putRedisKey(client, 'ledger-gateway:', { ...record, revokedAt: new Date().toISOString() });
      const revokedAt = Date.now();
      for (const gateway of replicas)
        await expect
          .poll(async () => (await ledgerEnd(gateway.url, `Bearer ${key}`)).status, { timeout: 1_000, interval: 20 })
          .toBe(401);
      expect(Date.now() - revokedAt).toBeLessThan(1_000);
    } finally {
      client.disconnect();
    }
  });
});

describe('a consumer named by a key file', () => {
  it('has its quota and usage counted by key as by token', async () => {
    const file = keyFilePath();
    const { key, record } = newKey('payments');
    writeKeys(file, [record]);
    const gateway = await replica({
      ...consumersWithKeyFile(file, { quotas: { operations: { 'getV2StateLedger-end': { perDay: 1 } } } }),
    });
    expect((await ledgerEnd(gateway.url, `Bearer ${key}`)).status).toBe(200);
    expect((await ledgerEnd(gateway.url, `Bearer ${key}`)).status).toBe(429);
  });
});

describe('a WebSocket stream of a consumer', () => {
  it('is counted as one call at its 101, and the bytes its tunnel carried each way are added when it ends', async () => {
    wsUpstream = await startWebSocketUpstream();
    const gateway = await startGateway(wsUpstream.url, {
      consumers: { list: [{ name: 'alice-app', match: { tokens: [{ sub: 'alice' }] } }] },
      admin: { purgeToken: ADMIN_TOKEN },
    });
    gateways.push(gateway);
    const frame = JSON.stringify({ filter: 'x'.repeat(2_000) });
    const url = `${gateway.url.replace('http', 'ws')}/v2/updates`;
    const token = await gateway.issuer.mint();
    expect(await echoOnce(url, [`jwt.token.${token}`, 'daml.ws.auth'], {}, frame)).toBe(`echo:${frame}`);
    type Row = { consumer: string; calls: number; requestBytes: number; responseBytes: number };
    let row: Row | undefined;
    await eventually(async () => {
      const rows = ((await usage(gateway)).json() as { rows: Row[] }).rows;
      row = rows.find((entry) => entry.consumer === 'alice-app');
      return row !== undefined && row.responseBytes > 0;
    }, "the stream's bytes in the usage report");
    // Frames carry a few bytes of their own (a client's are masked): at least the payloads, not much more.
    expect(row).toMatchObject({ calls: 1 });
    expect(row!.requestBytes).toBeGreaterThanOrEqual(frame.length);
    expect(row!.requestBytes).toBeLessThan(frame.length + 100);
    expect(row!.responseBytes).toBeGreaterThanOrEqual(frame.length + 'echo:'.length);
    expect(row!.responseBytes).toBeLessThan(frame.length + 100);
  });
});
