// A verified-token cache hit costs no signature check, and the metric shows it.
import { expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { closeAfterEach } from '../helpers/per-test.js';

let upstream: RecordingUpstream | undefined;
let gw: RunningGateway | undefined;
closeAfterEach(
  () => gw,
  () => upstream,
);

const checks = async (gateway: RunningGateway) =>
  (await gateway.registry.getSingleMetric('ledger_gateway_token_signature_checks_total')!.get()).values[0]?.value ?? 0;

it('counts one signature check per new token, none for repeated calls', async () => {
  upstream = await startRecordingUpstream();
  gw = await startGateway(upstream.url);
  for (let i = 0; i < 20; i++)
    expect((await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() })).status).toBe(200);
  expect(await checks(gw)).toBe(1);
  const other = await gw.issuer.mint({ sub: 'bob' });
  for (let i = 0; i < 5; i++)
    await fetch(`${gw.url}/v2/state/ledger-end`, { headers: { authorization: `Bearer ${other}` } });
  expect(await checks(gw)).toBe(2);
  expect(await gw.registry.metrics()).toContain('ledger_gateway_token_signature_checks_total 2');
});
