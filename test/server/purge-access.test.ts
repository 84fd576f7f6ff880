// POST /cache/version/purge and GET /config on the admin listener: the admin.purgeToken bearer, or
// a loopback peer when admin.trustLoopback is on.
import { request } from 'node:http';
import { describe, expect, it } from 'vitest';
import { isLoopbackAddress, adminTokenCallAllowed } from '../../src/server/admin-listener.js';
import { startGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { startRecordingUpstream } from '../helpers/recording-upstream.js';

const current = perTest();
const TOKEN = 'purge-token-0123456789abcdef';

/** The status of one call to the admin listener over a real connection from `localAddress`. */
function adminCall(
  adminUrl: string,
  method: string,
  path: string,
  localAddress: string,
  authorization?: string,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const call = request(`${adminUrl}${path}`, {
      method,
      localAddress,
      agent: false,
      headers: authorization === undefined ? {} : { authorization },
      timeout: 5_000,
    });
    call.on('response', (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode!));
    });
    call.on('timeout', () => call.destroy(new Error('no answer within 5 s')));
    call.on('error', reject);
    call.end();
  });
}

describe('who may purge the version cache', () => {
  it('counts 127.0.0.0/8, ::1 and IPv4-mapped 127.x as loopback, nothing else', () => {
    for (const address of ['127.0.0.1', '127.9.8.7', '::1', '::ffff:127.0.0.1'])
      expect(isLoopbackAddress(address), address).toBe(true);
    for (const address of ['10.0.0.5', '128.0.0.1', '::2', '::ffff:10.0.0.5', 'fe80::1', 'localhost', '', undefined])
      expect(isLoopbackAddress(address), String(address)).toBe(false);
  });

  it('lets a non-loopback caller purge only with the configured token, compared whole', () => {
    expect(adminTokenCallAllowed(true, undefined, undefined)).toBe(true);
    expect(adminTokenCallAllowed(false, `Bearer ${TOKEN}`, undefined)).toBe(false); // no token configured
    expect(adminTokenCallAllowed(false, undefined, TOKEN)).toBe(false);
    expect(adminTokenCallAllowed(false, `Bearer ${TOKEN}`, TOKEN)).toBe(true);
    expect(adminTokenCallAllowed(false, `bearer ${TOKEN}`, TOKEN)).toBe(true);
    expect(adminTokenCallAllowed(false, `Bearer ${TOKEN}x`, TOKEN)).toBe(false);
    expect(adminTokenCallAllowed(false, `Bearer ${TOKEN.slice(0, -1)}`, TOKEN)).toBe(false);
    expect(adminTokenCallAllowed(false, `Basic ${TOKEN}`, TOKEN)).toBe(false);
    expect(adminTokenCallAllowed(false, TOKEN, TOKEN)).toBe(false);
  });

  // 127.0.0.6 is where Istio's inbound passthrough connects from: behind a mesh sidecar, every peer
  // of the admin port is loopback, so loopback alone vouches for nobody.
  it('refuses a loopback peer (127.0.0.6, a sidecar) without the token unless admin.trustLoopback is on', async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const closed = (current.gw = await startGateway(upstream.url, { admin: { purgeToken: TOKEN } }));
    for (const from of ['127.0.0.6', '127.0.0.1']) {
      expect(await adminCall(closed.adminUrl, 'POST', '/cache/version/purge', from), from).toBe(403);
      expect(await adminCall(closed.adminUrl, 'GET', '/config', from), from).toBe(403);
      expect(await adminCall(closed.adminUrl, 'POST', '/cache/version/purge', from, `Bearer ${TOKEN}`), from).toBe(204);
      expect(await adminCall(closed.adminUrl, 'GET', '/config', from, `Bearer ${TOKEN}`), from).toBe(200);
      expect(await adminCall(closed.adminUrl, 'GET', '/metrics', from), from).toBe(200);
    }
    await closed.close();

    const trusting = (current.gw = await startGateway(upstream.url, { admin: { trustLoopback: true } }));
    expect(await adminCall(trusting.adminUrl, 'POST', '/cache/version/purge', '127.0.0.6')).toBe(204);
    expect(await adminCall(trusting.adminUrl, 'GET', '/config', '127.0.0.6')).toBe(200);
    // The opt-in is for loopback peers only.
    const remote = { remoteAddress: '10.0.0.5' };
    expect((await trusting.gateway.admin.inject({ method: 'GET', url: '/config', ...remote })).statusCode).toBe(403);
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
