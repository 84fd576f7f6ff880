// Path tricks: none reaches another route upstream than the one the catalogue matched, and none
// escapes authentication or the operation's rules.
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { canonicalPath, matchOperation } from '../../src/operations.js';
import { gatewayForFile } from '../helpers/file-gateway.js';

const running = gatewayForFile();

function rawGet(path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(running.gw.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => {
      const lines = Object.entries(headers)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      socket.write(`GET ${path} HTTP/1.1\r\nHost: gw\r\n${lines}Connection: close\r\n\r\n`);
    });
    let data = '';
    socket.on('data', (d) => {
      data += d.toString();
    });
    socket.on('error', reject);
    socket.on('close', () =>
      resolve({ status: Number(data.slice(9, 12)), body: data.slice(data.indexOf('\r\n\r\n') + 4) }),
    );
  });
}

describe('canonical matching', () => {
  it('decodes encoded unreserved characters and ignores one trailing slash, nothing else', () => {
    expect(canonicalPath('/v2/updates/update-by-offse%74')).toBe('/v2/updates/update-by-offset');
    expect(canonicalPath('/%76%32/version')).toBe('/v2/version');
    expect(canonicalPath('/v2/version/')).toBe('/v2/version');
    expect(canonicalPath('/v2/parties/a%2Fb')).toBe('/v2/parties/a%2Fb');
    expect(canonicalPath('/v2/parties/a%3A%3Ab')).toBe('/v2/parties/a%3A%3Ab');
    expect(canonicalPath('/v2/parties/%2541')).toBe('/v2/parties/%2541'); // double encoding stays
    expect(matchOperation('POST', '/v2/updates/update-by-offse%74')?.name).toBe('getUpdateByOffset');
    expect(matchOperation('PATCH', '/v2/idps/x/')?.name).toBe('updateIdentityProviderConfig');
    expect(matchOperation('POST', '/v2/package-vetting/%75pdate')?.name).toBe('updateVettedPackages');
  });
});

describe('path tricks through the gateway', () => {
  const refused = [
    '/v2/../v2/version',
    '/v2/%2e%2e/version',
    '/v2/.%2E/version',
    '/v2/./version',
    '/v2//version',
    '/v2/version/..',
    '/v2%2f..%2fversion/..',
    '/v2/version#',
    '/v2/version#x',
    '/v2/version?a=1#/../users',
    // Dot and empty segments a hop that decodes %2F would see (and climb out of /v2, or reach another route, with).
    '/v2/..%2f..%2fdocs/openapi',
    '/v2/idps/x%2F..%2F..%2Fusers',
    '/v2/users/.%2Fadmin',
    '/v2/users/a%2f.',
    '/v2/%2E%2e%2Fversion',
    '/v2/parties/%2e%2F',
    '/v2/users/%2F',
    '/v2/users/alice%2F',
    '/v2/users/%2Falice/rights',
    '/v2/idps/a%2F%2Fb',
    '/%2Fv2/version',
  ];
  for (const path of refused) {
    it(`refuses ${path} without reaching the participant`, async () => {
      const before = running.upstream.requests.length;
      const answer = await rawGet(path, running.gw.auth());
      expect(answer.status).toBe(400);
      expect(JSON.parse(answer.body)).toMatchObject({ code: 'GATEWAY_INVALID_PATH' });
      expect(running.upstream.requests.length).toBe(before);
    });
  }

  it('keeps forwarding encoded slashes and dots that make no dot segment, raw', async () => {
    for (const path of [
      '/v2/idps/a%20b%2Fc',
      '/v2/parties/Alice%3A%3A1220%2Fab',
      '/v2/users/...%2F...',
      '/v2/users/a.%2F.b',
      '/v2/idps/%2e%2e.%2Fx',
    ]) {
      const answer = await rawGet(path, running.gw.auth());
      expect(answer.status, path).toBe(200);
      expect(running.upstream.requests.at(-1)!.url, path).toBe(path);
    }
  });

  it('case tricks and prefixes outside /v2 are not served', async () => {
    for (const path of ['/V2/version', '/v2version', '/v3/version', '/%56%32/version']) {
      const answer = await rawGet(path, running.gw.auth());
      expect(answer.status, path).toBe(404);
    }
  });

  it('no trick escapes authentication', async () => {
    for (const path of [
      '/v2/versio%6E',
      '/v2/version/',
      '/v2/version.',
      '/v2/%2541',
      '/v2/updates%2Fupdate-by-offset',
      '/%76%32/version',
    ]) {
      const before = running.upstream.requests.length;
      const answer = await rawGet(path);
      expect(answer.status, path).toBe(401);
      expect(running.upstream.requests.length, path).toBe(before);
    }
  });

  it('an encoded name of a catalogue route is labelled, authorized and checked as that route, and forwarded raw', async () => {
    const answer = await rawGet('/v2/versio%6E', running.gw.auth());
    expect(answer.status).toBe(200);
    expect(running.upstream.requests.at(-1)!.url).toBe('/v2/versio%6E');
    const metrics = await running.gw.registry.getSingleMetricAsString('ledger_gateway_requests_total');
    expect(metrics).toMatch(/operation="getVersion",method="GET",status="200"/);
  });
});
