// Tokens accepted, counted by kind (audience or scope) and issuer, once per token: Canton 3.7 removes
// scope-based tokens, and the count names the issuers whose clients must move before the upgrade.
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { MetricNames } from '../../src/telemetry/metrics.js';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { startRecordingUpstream } from '../helpers/recording-upstream.js';
import { TEST_ISSUER } from '../helpers/tokens.js';

async function acceptedTokens(gw: RunningGateway): Promise<Record<string, number>> {
  const metric = await gw.registry.getSingleMetric(MetricNames.tokensAccepted)!.get();
  return Object.fromEntries(metric.values.map((v) => [`${v.labels.issuer} ${v.labels.kind}`, v.value]));
}

describe('ledger_gateway_tokens_accepted_total', () => {
  const current = perTest();

  it('counts each accepted token once by issuer and kind; refused tokens and cached calls are not counted', async () => {
    const upstream = await startRecordingUpstream();
    current.upstream = upstream;
    const gw = await startGateway(upstream.url);
    current.gw = gw;
    const audienceToken = await gw.issuer.mint({ sub: 'alice' });
    const scopeToken = await gw.issuer.mint({ sub: 'bob', aud: undefined, scope: 'openid daml_ledger_api' });
    const neither = await gw.issuer.mint({ sub: 'carol', aud: undefined, scope: 'openid' });
    const call = async (token: string) =>
      (await request(`${gw.url}/v2/state/ledger-end`, { headers: { authorization: `Bearer ${token}` } })).statusCode;

    expect(await call(audienceToken)).toBe(200);
    expect(await call(audienceToken)).toBe(200); // the verified-token cache answers: not a new token
    expect(await call(scopeToken)).toBe(200);
    expect(await call(scopeToken)).toBe(200);
    expect(await call(neither)).toBe(401);
    expect(await acceptedTokens(gw)).toEqual({ [`${TEST_ISSUER} audience`]: 1, [`${TEST_ISSUER} scope`]: 1 });
  });
});
