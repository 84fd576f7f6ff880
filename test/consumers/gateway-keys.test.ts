// Gateway keys against a real gateway and a recording upstream: a key created, used (its consumer on
// the principal, never forwarded), revoked and expired (refused like a forged token, the
// unauthenticated budget spent), restricted by source and operation; malformed and oversized keys.
import { describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { closeAfterEach } from '../helpers/per-test.js';
import { logCapture } from '../helpers/log-capture.js';
import { rawRequest } from '../auth/support/http.js';
import { createTestIssuer } from '../helpers/tokens.js';
import { consumersWithKeyFile, keyFilePath, ledgerEnd, newKey, writeKeys } from './support.js';

let upstream: RecordingUpstream | undefined;
let gw: RunningGateway | undefined;
closeAfterEach(
  () => gw,
  () => upstream,
);

async function gatewayWithKeys(file: string, overrides: Record<string, unknown> = {}, consumer = {}) {
  upstream = await startRecordingUpstream();
  const log = logCapture();
  gw = await startGateway(
    upstream.url,
    { consumers: consumersWithKeyFile(file, consumer), log: { access: { enabled: true } }, ...overrides },
    { logger: log.logger },
  );
  return log;
}

/** The parts of a 401 that do not change from call to call. */
const refusalShape = (response: { status: number; headers: Record<string, unknown>; json(): unknown }) => {
  const body = response.json() as Record<string, unknown>;
  return {
    status: response.status,
    challenge: response.headers['www-authenticate'],
    body: { ...body, correlationId: null, traceId: null },
  };
};

describe('gateway keys in a key file', () => {
  it('admits a key of a configured consumer, sets the consumer, and never forwards the key', async () => {
    const file = keyFilePath();
    const { key, record } = newKey('payments');
    writeKeys(file, [record]);
    const log = await gatewayWithKeys(file);
    const response = await ledgerEnd(gw!.url, `Bearer ${key}`);
    expect(response.status).toBe(200);
    expect(upstream!.requests).toHaveLength(1);
    expect(upstream!.requests[0]!.headers.authorization).toBeUndefined();
    expect(JSON.stringify(upstream!.requests[0]!.rawHeaders)).not.toContain(key);
    const line = await log.requestLine(response.headers['x-request-id'] as string);
    expect(line).toMatchObject({ status: 200, consumer: 'payments', subject: 'payments' });
    expect(log.lines.join('\n')).not.toContain(key);
    // The metrics count the call under its consumer.
    await expect
      .poll(() => gw!.registry.metrics())
      .toMatch(
        /ledger_gateway_consumer_calls_total\{consumer="payments",operation="getV2StateLedger-end",outcome="success"\} 1/,
      );
  });

  it('refuses an unknown, a revoked and an expired key exactly as a forged JWT, and a malformed one', async () => {
    const file = keyFilePath();
    const live = newKey('payments');
    const expired = newKey('payments', { expiresAt: new Date(Date.now() - 1000).toISOString() });
    writeKeys(file, [live.record, expired.record]);
    await gatewayWithKeys(file);
    const forged = await (await createTestIssuer()).mint(); // the trusted issuer's name, another key
    const forgedShape = refusalShape(await ledgerEnd(gw!.url, `Bearer ${forged}`));
    expect(forgedShape.status).toBe(401);
    const unknown = newKey('payments').key;
    expect(refusalShape(await ledgerEnd(gw!.url, `Bearer ${unknown}`))).toEqual(forgedShape);
    expect(refusalShape(await ledgerEnd(gw!.url, `Bearer ${expired.key}`))).toEqual(forgedShape);
    expect(refusalShape(await ledgerEnd(gw!.url, `Bearer lgk_short`))).toEqual(forgedShape);

    expect((await ledgerEnd(gw!.url, `Bearer ${live.key}`)).status).toBe(200);
    writeKeys(file, [{ ...live.record, revokedAt: new Date().toISOString() }, expired.record]);
    await expect
      .poll(async () => (await ledgerEnd(gw!.url, `Bearer ${live.key}`)).status, { timeout: 3_000 })
      .toBe(401);
    const forwarded = upstream!.requests.length;
    expect(refusalShape(await ledgerEnd(gw!.url, `Bearer ${live.key}`))).toEqual(forgedShape);
    expect(upstream!.requests).toHaveLength(forwarded);
    const metrics = await gw!.registry.metrics();
    for (const reason of ['unknown_gateway_key', 'gateway_key_expired', 'gateway_key_revoked', 'malformed'])
      expect(metrics).toMatch(new RegExp(`ledger_gateway_auth_failures_total\\{reason="${reason}"\\} [1-9]`));
  });

  it('spends the unauthenticated budget on unknown keys, as on forged tokens', async () => {
    const file = keyFilePath();
    writeKeys(file, []);
    await gatewayWithKeys(file, {
      protection: { unauthenticated: { rate: { requests: 1, perSeconds: 60, burst: 2 }, refusalDelayMs: 0 } },
    });
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await ledgerEnd(gw!.url, `Bearer ${newKey('payments').key}`)).status);
    expect(statuses).toEqual([401, 401, 429]);
  });

  it('keeps a key to its sources and operations', async () => {
    const file = keyFilePath();
    const elsewhere = newKey('payments', { sources: ['10.0.0.0/8'] });
    const here = newKey('payments', { sources: ['127.0.0.0/8'], operations: ['getV2StateLedger-end'] });
    writeKeys(file, [elsewhere.record, here.record]);
    await gatewayWithKeys(file);
    expect((await ledgerEnd(gw!.url, `Bearer ${elsewhere.key}`)).status).toBe(401);
    expect((await ledgerEnd(gw!.url, `Bearer ${here.key}`)).status).toBe(200);
    const other = await rawRequest(gw!.url, '/v2/parties', { headers: ['authorization', `Bearer ${here.key}`] });
    expect(other.status).toBe(403);
    expect(upstream!.requests).toHaveLength(1);
  });

  it('answers a 1 MiB key header with a coded 431 and goes on serving', async () => {
    const file = keyFilePath();
    const { key, record } = newKey('payments');
    writeKeys(file, [record]);
    await gatewayWithKeys(file);
    const huge = await ledgerEnd(gw!.url, `Bearer lgk_${'A'.repeat(1024 * 1024)}`).catch((error: Error) => error);
    if (!(huge instanceof Error)) {
      expect(huge.status).toBe(431);
      expect(huge.json()).toMatchObject({ code: 'GATEWAY_HEADERS_TOO_LARGE' });
    }
    expect((await ledgerEnd(gw!.url, `Bearer ${key}`)).status).toBe(200);
  });

  it('refuses a configuration whose consumer names collide, naming the key path', async () => {
    upstream = await startRecordingUpstream();
    await expect(
      startGateway(upstream.url, { consumers: { list: [{ name: 'payments' }, { name: 'payments' }] } }),
    ).rejects.toThrow(/consumers\.list\[1\]\.name: "payments" is also consumers\.list\[0\]\.name/);
  });
});
