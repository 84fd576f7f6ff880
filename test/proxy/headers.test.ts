// Header rewriting as pure functions: what goes upstream for a client's raw header list.
import { describe, expect, it } from 'vitest';
import { upstreamRequestHeaders, type ForwardedFor } from '../../src/proxy/headers.js';
import { startGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { startRecordingUpstream } from '../helpers/recording-upstream.js';

const current = perTest();

const client: ForwardedFor = { remoteAddress: '198.51.100.9', protocol: 'http', host: 'gw.example', trusted: false };
const trustedProxy: ForwardedFor = { ...client, remoteAddress: '10.0.0.2', trusted: true };

/** The sent headers as [name, value] pairs. */
function sent(raw: string[], forwarded = client, dropTraceContext = false, extraDrop?: ReadonlySet<string>) {
  const flat = upstreamRequestHeaders(raw, forwarded, dropTraceContext, extraDrop);
  const pairs: Array<[string, string]> = [];
  for (let i = 0; i < flat.length; i += 2) pairs.push([flat[i]!, flat[i + 1]!]);
  return pairs;
}

describe('upstreamRequestHeaders: underscore twins', () => {
  it('drops the underscore forms of the headers the gateway rewrites, whoever sent them', () => {
    const raw = [
      'X_Forwarded_For',
      '6.6.6.6',
      'x_forwarded_proto',
      'https',
      'X_Forwarded_Host',
      'evil.example',
      'X_Real_IP',
      '6.6.6.6',
      'X-Forwarded_For',
      '6.6.6.6',
      'Accept',
      '*/*',
    ];
    for (const forwarded of [client, trustedProxy]) {
      expect(sent(raw, forwarded)).toEqual([
        ['Accept', '*/*'],
        ['x-forwarded-for', forwarded.remoteAddress],
        ['x-forwarded-proto', 'http'],
        ['x-forwarded-host', 'gw.example'],
      ]);
    }
  });

  it('drops the underscore forms of hop-by-hop and framing headers and of those Connection names', () => {
    const raw = [
      'Connection',
      'close, X-Internal-Hop',
      'Transfer_Encoding',
      'chunked',
      'Content_Length',
      '5',
      'Keep_Alive',
      'timeout=5',
      'Proxy_Authorization',
      'Basic Zm9vOmJhcg==',
      'X_Internal_Hop',
      'secret',
      'Content-Length',
      '2',
    ];
    expect(sent(raw).filter(([name]) => !name.startsWith('x-forwarded-'))).toEqual([['Content-Length', '2']]);
  });

  it('drops the underscore forms of headers the caller drops', () => {
    const dropped = new Set(['accept-encoding']);
    expect(sent(['Accept_Encoding', 'br', 'Accept', '*/*'], client, false, dropped)[0]).toEqual(['Accept', '*/*']);
  });

  it("keeps other underscored headers, and a trusted proxy's real X-Forwarded-For", () => {
    expect(sent(['X_Custom_Id', '7', 'Tenant_Name', 'a_b'])).toEqual([
      ['X_Custom_Id', '7'],
      ['Tenant_Name', 'a_b'],
      ['x-forwarded-for', '198.51.100.9'],
      ['x-forwarded-proto', 'http'],
      ['x-forwarded-host', 'gw.example'],
    ]);
    expect(sent(['X-Forwarded-For', '203.0.113.7', 'X_Forwarded_For', '6.6.6.6'], trustedProxy)).toContainEqual([
      'x-forwarded-for',
      '203.0.113.7, 10.0.0.2',
    ]);
  });
});

describe('underscore twins through the gateway', () => {
  it("the participant receives the gateway's X-Forwarded-For and no X_Forwarded_For", async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url));
    const headers = gw.auth({ X_Forwarded_For: '6.6.6.6', X_Real_IP: '6.6.6.6', X_Tenant: 'kept' });
    const response = await fetch(`${gw.url}/v2/state/ledger-end`, { headers });
    expect(response.status).toBe(200);
    const received = upstream.requests[0]!;
    expect(received.headers['x_forwarded_for']).toBeUndefined();
    expect(received.headers['x_real_ip']).toBeUndefined();
    expect(received.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(received.headers['x_tenant']).toBe('kept');
  });
});
