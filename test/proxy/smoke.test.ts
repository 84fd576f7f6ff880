import { afterEach, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';

let upstream: RecordingUpstream;
let gw: RunningGateway;
afterEach(async () => {
  await gw?.close();
  await upstream?.close();
});

describe('smoke', () => {
  it('forwards a POST body byte for byte', async () => {
    upstream = await startRecordingUpstream();
    gw = await startGateway(upstream.url);
    const body = '{"offset": 9223372036854775807, "x": 1}';
    const response = await fetch(`${gw.url}/v2/updates/update-by-id?a=1&b=%2F`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ ok: true });
    expect(upstream.requests).toHaveLength(1);
    expect(upstream.requests[0]!.body.toString()).toBe(body);
    expect(upstream.requests[0]!.url).toBe('/v2/updates/update-by-id?a=1&b=%2F');
  });
});
