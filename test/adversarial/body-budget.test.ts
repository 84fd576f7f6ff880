// B1 of issue 40: the body budget filled with no body. A declared Content-Length was reserved before
// a byte arrived, so 4 token holders x 8 connections declaring 1 MiB each (22 KB of heads) made every
// other user's writes 503 for as long as they liked; without a token, HEAD /v2/version with a declared
// body did the same where getVersion is public. Now a body holds the bytes that arrived, no more.
import { beforeAll, describe, expect, it } from 'vitest';
import { buildDist } from '../helpers/process.js';
import { createTestIssuer, TEST_PARTICIPANT } from '../helpers/tokens.js';
import { metricValue, plainUpstream, runDriver, sleep, startShippedGateway } from './shipped-gateway.js';

const SUBMISSION =
  '{"commands":{"commands":[{"CreateCommand":{"templateId":"p:M:E","createArguments":{}}}],"commandId":"c","actAs":["Alice"]}}';

async function submit(api: string, token: string): Promise<number> {
  const response = await fetch(`${api}/v2/commands/submit-and-wait-for-transaction`, {
    method: 'POST',
    body: SUBMISSION,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    signal: AbortSignal.timeout(20_000),
  });
  await response.arrayBuffer();
  return response.status;
}

describe('B1, declared bodies that never come, against the shipped process', () => {
  beforeAll(() => buildDist(), 120_000);

  it('4 token holders x 8 connections declaring 1 MiB hold nothing: another user writes', async () => {
    const upstream = await plainUpstream();
    const issuer = await createTestIssuer();
    const gateway = await startShippedGateway(upstream.url, issuer.issuerConfig, TEST_PARTICIPANT);
    try {
      const tokens = await Promise.all(['m1', 'm2', 'm3', 'm4'].map((sub) => issuer.mint({ sub })));
      const carol = await issuer.mint({ sub: 'carol' });
      expect(await submit(gateway.api, carol)).toBe(200);
      const reservations = runDriver('B1', { api: gateway.api, tokens });
      await sleep(3_000);
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) statuses.push(await submit(gateway.api, carol));
      const held = await metricValue(gateway.admin, 'ledger_gateway_body_buffer_bytes');
      const result = (await reservations.stop()) as { opened: number };
      expect(result.opened).toBeGreaterThanOrEqual(32);
      expect(statuses).toEqual([200, 200, 200, 200, 200]);
      expect(held).toBe(0);
    } finally {
      await gateway.close();
      await upstream.close();
    }
  }, 90_000);

  it('without a token, HEAD /v2/version declaring bodies from 4 addresses (getVersion public) holds nothing either', async () => {
    const upstream = await plainUpstream();
    const issuer = await createTestIssuer();
    const gateway = await startShippedGateway(upstream.url, issuer.issuerConfig, TEST_PARTICIPANT, {
      auth: { publicOperations: ['getVersion'] },
    });
    try {
      const carol = await issuer.mint({ sub: 'carol' });
      expect(await submit(gateway.api, carol)).toBe(200);
      // 64 KiB each: bodies up to upstream.bufferBodyBytes are read whole before they are sent.
      const reservations = runDriver('B1', {
        api: gateway.api,
        sources: ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'],
        connectionsPerCaller: 128,
        declaredBytes: 65_536,
        method: 'HEAD',
        path: '/v2/version',
      });
      await sleep(4_000);
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) statuses.push(await submit(gateway.api, carol));
      const held = await metricValue(gateway.admin, 'ledger_gateway_body_buffer_bytes');
      const result = (await reservations.stop()) as { opened: number; answers: Record<string, number> };
      expect(result.opened).toBeGreaterThanOrEqual(512);
      expect(result.answers['401'], 'getVersion is public: the bodies were waited for').toBeUndefined();
      expect(statuses).toEqual([200, 200, 200, 200, 200]);
      expect(held).toBe(0);
    } finally {
      await gateway.close();
      await upstream.close();
    }
  }, 90_000);
});
