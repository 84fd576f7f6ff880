// POST /cache/version/purge on the admin listener: loopback callers, or the admin.purgeToken bearer.
import { describe, expect, it } from 'vitest';
import { isLoopbackAddress, purgeAllowed } from '../../src/server/admin-listener.js';
import { startGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { startRecordingUpstream } from '../helpers/recording-upstream.js';

const current = perTest();
const TOKEN = 'purge-token-0123456789abcdef';

describe('who may purge the version cache', () => {
  it('counts 127.0.0.0/8, ::1 and IPv4-mapped 127.x as loopback, nothing else', () => {
    for (const address of ['127.0.0.1', '127.9.8.7', '::1', '::ffff:127.0.0.1'])
      expect(isLoopbackAddress(address), address).toBe(true);
    for (const address of ['10.0.0.5', '128.0.0.1', '::2', '::ffff:10.0.0.5', 'fe80::1', 'localhost', '', undefined])
      expect(isLoopbackAddress(address), String(address)).toBe(false);
  });

  it('lets a non-loopback caller purge only with the configured token, compared whole', () => {
    expect(purgeAllowed(true, undefined, undefined)).toBe(true);
    expect(purgeAllowed(false, `Bearer ${TOKEN}`, undefined)).toBe(false); // no token configured
    expect(purgeAllowed(false, undefined, TOKEN)).toBe(false);
    expect(purgeAllowed(false, `Bearer ${TOKEN}`, TOKEN)).toBe(true);
    expect(purgeAllowed(false, `bearer ${TOKEN}`, TOKEN)).toBe(true);
    expect(purgeAllowed(false, `Bearer ${TOKEN}x`, TOKEN)).toBe(false);
    expect(purgeAllowed(false, `Bearer ${TOKEN.slice(0, -1)}`, TOKEN)).toBe(false);
    expect(purgeAllowed(false, `Basic ${TOKEN}`, TOKEN)).toBe(false);
    expect(purgeAllowed(false, TOKEN, TOKEN)).toBe(false);
  });

  it('purges for a loopback caller over the network (204)', async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url));
    expect((await fetch(`${gw.adminUrl}/cache/version/purge`, { method: 'POST' })).status).toBe(204);
  });

  it('refuses a remote caller without a configured token (403), keeps probes and metrics open', async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url));
    const admin = gw.gateway.admin;
    const remote = { remoteAddress: '10.0.0.5' };
    const purge = await admin.inject({ method: 'POST', url: '/cache/version/purge', ...remote });
    expect(purge.statusCode).toBe(403);
    const withToken = await admin.inject({
      method: 'POST',
      url: '/cache/version/purge',
      headers: { authorization: `Bearer ${TOKEN}` },
      ...remote,
    });
    expect(withToken.statusCode).toBe(403);
    expect((await admin.inject({ method: 'GET', url: '/metrics', ...remote })).statusCode).toBe(200);
    expect((await admin.inject({ method: 'GET', url: '/livez', ...remote })).statusCode).toBe(200);
    expect([200, 503]).toContain((await admin.inject({ method: 'GET', url: '/readyz', ...remote })).statusCode);
  });

  it('accepts the configured token from a remote caller and refuses a wrong one', async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url, { admin: { purgeToken: TOKEN } }));
    const purge = (authorization?: string) =>
      gw.gateway.admin.inject({
        method: 'POST',
        url: '/cache/version/purge',
        remoteAddress: '203.0.113.7',
        headers: authorization === undefined ? {} : { authorization },
      });
    expect((await purge(`Bearer ${TOKEN}`)).statusCode).toBe(204);
    expect((await purge(`Bearer ${TOKEN.replace('0', '1')}`)).statusCode).toBe(403);
    expect((await purge()).statusCode).toBe(403);
  });
});
