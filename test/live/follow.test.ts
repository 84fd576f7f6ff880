// What lives across exchanges follows the keys it reads (live/generations.ts `follow`): applied at
// start, then only after a reload that changed what it reads. The version cache's answers follow
// versionCache: a reload of another key keeps them, one of its TTLs drops them.
import { describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { closeAfterEach } from '../helpers/per-test.js';
import { answerJson, startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';

let upstream: RecordingUpstream | undefined;
let gw: RunningGateway | undefined;
closeAfterEach(
  () => gw,
  () => upstream,
);

async function cacheStatus(gateway: RunningGateway): Promise<string | null> {
  const answer = await fetch(`${gateway.url}/v2/version`, { headers: gateway.auth() });
  expect(answer.status).toBe(200);
  await answer.arrayBuffer();
  return answer.headers.get('x-cache');
}

describe('a follower of the live configuration', () => {
  it('is applied again only when a reload changes what it follows', async () => {
    upstream = await startRecordingUpstream(answerJson(200, { version: '3.5.10' }));
    gw = await startGateway(upstream.url, { versionCache: { ttlSeconds: 60 } });
    expect(await cacheStatus(gw)).toBe('MISS');

    // Another key (the log level, the policy's rules) reloads: the stored answer stays.
    const running = gw.config;
    const otherKeys = { ...running, log: { ...running.log, level: 'warn' as const } };
    expect((await gw.gateway.reload(() => otherKeys)).result).toBe('success');
    expect(await cacheStatus(gw)).toBe('HIT');
    expect(upstream.requests).toHaveLength(1);

    // The TTL it follows changes: the answer stored under the old one is dropped.
    const newTtl = { ...otherKeys, versionCache: { ...running.versionCache, ttlSeconds: 120 } };
    expect((await gw.gateway.reload(() => newTtl)).result).toBe('success');
    expect(await cacheStatus(gw)).toBe('MISS');
    expect(upstream.requests).toHaveLength(2);
  });
});
