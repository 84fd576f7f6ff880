// CORS refusals and grants through the running gateway: a preflight to a path the gateway does not
// serve is refused in Canton's shape (never Fastify's own 500), and an origin not listed is granted nothing.
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { startGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { startRecordingUpstream } from '../helpers/recording-upstream.js';
import { JS_CANTON_ERROR_KEYS } from '../helpers/canton-error-shape.js';

const cors = { enabled: true, origins: ['https://app.example'], credentials: true };
const current = perTest();

async function start() {
  const upstream = (current.upstream = await startRecordingUpstream());
  const gw = (current.gw = await startGateway(upstream.url, { cors }));
  return { gw, upstream };
}

/** A preflight sent byte for byte (fetch would resolve the dot segments itself). */
function rawPreflight(url: string, path: string): Promise<{ status: number; head: string; body: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () =>
      socket.write(
        `OPTIONS ${path} HTTP/1.1\r\nHost: gw\r\nOrigin: https://app.example\r\nAccess-Control-Request-Method: GET\r\nConnection: close\r\n\r\n`,
      ),
    );
    let data = '';
    socket.on('data', (chunk) => {
      data += chunk.toString();
    });
    socket.on('error', reject);
    socket.on('close', () => {
      const split = data.indexOf('\r\n\r\n');
      resolve({ status: Number(data.slice(9, 12)), head: data.slice(0, split), body: data.slice(split + 4) });
    });
  });
}

const preflight = {
  origin: 'https://app.example',
  'access-control-request-method': 'POST',
  'access-control-request-headers': 'authorization',
};

describe('CORS: refusals before the preflight', () => {
  it("answers a preflight to a path the gateway does not serve in Canton's shape, counted as a 4xx", async () => {
    const { gw, upstream } = await start();
    for (const [path, status, code] of [
      ['/nope', 404, 'GATEWAY_ROUTE_NOT_EXPOSED'],
      ['/livez', 404, 'GATEWAY_ROUTE_NOT_EXPOSED'],
      ['/v2/../users', 400, 'GATEWAY_INVALID_PATH'],
    ] as const) {
      const answer = await rawPreflight(gw.url, path);
      expect(answer.status, path).toBe(status);
      const body = JSON.parse(answer.body) as Record<string, unknown>;
      expect(Object.keys(body).sort(), path).toEqual(JS_CANTON_ERROR_KEYS);
      expect(body.code, path).toBe(code);
      expect(answer.head, path).toContain(`x-request-id: ${String(body.correlationId)}`);
    }
    expect(upstream.requests).toHaveLength(0);
    const counted = await gw.registry.getSingleMetricAsString('ledger_gateway_requests_total');
    expect(counted).toMatch(
      /operation="unknown",method="OPTIONS",status="404",error_code="GATEWAY_ROUTE_NOT_EXPOSED"\} 2/,
    );
    expect(counted).toMatch(/operation="unknown",method="OPTIONS",status="400",error_code="GATEWAY_INVALID_PATH"\} 1/);
    expect(counted).not.toMatch(/status="5\d\d"/);
  });
});

describe('CORS: what an origin not listed gets', () => {
  it('neither Access-Control-Allow-Origin nor Allow-Credentials (nor Expose-Headers), on a preflight or a call', async () => {
    const { gw, upstream } = await start();
    for (const origin of ['https://evil.example', 'null', 'https://app.example.evil.example']) {
      const answers = [
        await fetch(`${gw.url}/v2/version`, { method: 'OPTIONS', headers: { ...preflight, origin } }),
        await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth({ origin }) }),
        await fetch(`${gw.url}/v2/state/ledger-end`, { headers: { origin } }), // a refusal
      ];
      expect(
        answers.map((answer) => answer.status),
        origin,
      ).toEqual([204, 200, 401]);
      for (const answer of answers) {
        expect(answer.headers.get('access-control-allow-origin'), origin).toBeNull();
        expect(answer.headers.get('access-control-allow-credentials'), origin).toBeNull();
        expect(answer.headers.get('access-control-expose-headers'), origin).toBeNull();
        expect(answer.headers.get('vary'), origin).toContain('Origin');
      }
    }
    // A call without Origin (not from a browser) gets no CORS grant either.
    const plain = await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() });
    expect(plain.headers.get('access-control-allow-credentials')).toBeNull();
    expect(upstream.requests.map((request) => request.method)).toEqual(['GET', 'GET', 'GET', 'GET']);
  });

  it('a listed origin still gets the whole grant, on a preflight, a call and a refusal', async () => {
    const { gw } = await start();
    const answers = [
      await fetch(`${gw.url}/v2/version`, { method: 'OPTIONS', headers: preflight }),
      await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth({ origin: 'https://app.example' }) }),
      await fetch(`${gw.url}/v2/state/ledger-end`, { headers: { origin: 'https://app.example' } }),
    ];
    expect(answers.map((answer) => answer.status)).toEqual([204, 200, 401]);
    for (const answer of answers) {
      expect(answer.headers.get('access-control-allow-origin')).toBe('https://app.example');
      expect(answer.headers.get('access-control-allow-credentials')).toBe('true');
      expect(answer.headers.get('access-control-expose-headers')).toBe('x-request-id, retry-after');
    }
    expect(answers[0]!.headers.get('access-control-allow-methods')).toBe('GET, POST, PATCH, DELETE');
  });

  it('"*" grants any origin, without credentials', async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url, { cors: { enabled: true, origins: ['*'] } }));
    const answer = await fetch(`${gw.url}/v2/version`, {
      method: 'OPTIONS',
      headers: { ...preflight, origin: 'https://any.example' },
    });
    expect(answer.headers.get('access-control-allow-origin')).toBe('*');
    expect(answer.headers.get('access-control-allow-credentials')).toBeNull();
  });
});

describe('CORS on a reload', () => {
  it('is turned on, changed and turned off without a restart', async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url));
    const withCors = (section: Record<string, unknown>) => () => ({
      ...gw.config,
      cors: { ...gw.config.cors, ...section },
    });
    const preflightFrom = (origin: string) =>
      fetch(`${gw.url}/v2/parties`, { method: 'OPTIONS', headers: { ...preflight, origin } });
    const callFrom = (origin: string) => fetch(`${gw.url}/v2/parties`, { headers: gw.auth({ origin }) });

    // Off: an OPTIONS is a call like any other (no token: 401), and no answer varies by origin.
    expect((await preflightFrom('https://app.example')).status).toBe(401);
    const plain = await callFrom('https://app.example');
    expect(plain.headers.get('access-control-allow-origin')).toBeNull();
    expect(plain.headers.get('vary')).toBeNull();

    expect((await gw.gateway.reload(withCors({ enabled: true, origins: ['https://app.example'] }))).result).toBe(
      'success',
    );
    const granted = await preflightFrom('https://app.example');
    expect(granted.status).toBe(204);
    expect(granted.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(granted.headers.get('access-control-max-age')).toBe('600'); // the preflight headers: gateway.test.ts
    expect(granted.headers.get('content-length')).toBe('0');
    const forwarded = await callFrom('https://app.example');
    expect(forwarded.status).toBe(200);
    expect(forwarded.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(forwarded.headers.get('access-control-expose-headers')).toBe('x-request-id, retry-after');
    expect(forwarded.headers.get('vary')).toBe('Origin');

    // Another origin list: the old origin gets nothing, the new one its grant.
    await gw.gateway.reload(withCors({ enabled: true, origins: ['https://other.example'], credentials: true }));
    const refused = await preflightFrom('https://app.example');
    expect(refused.status).toBe(204);
    expect(refused.headers.get('access-control-allow-origin')).toBeNull();
    expect(refused.headers.get('access-control-allow-credentials')).toBeNull();
    const other = await callFrom('https://other.example');
    expect(other.headers.get('access-control-allow-origin')).toBe('https://other.example');
    expect(other.headers.get('access-control-allow-credentials')).toBe('true');

    await gw.gateway.reload(withCors({ enabled: false }));
    expect((await preflightFrom('https://other.example')).status).toBe(401);
    const off = await callFrom('https://other.example');
    expect(off.headers.get('access-control-allow-origin')).toBeNull();
    expect(off.headers.get('vary')).toBeNull();
    // Only the calls with a token reached the participant: never a preflight.
    expect(upstream.requests.map((request) => request.method)).toEqual(['GET', 'GET', 'GET', 'GET']);
  });

  it('grants any origin with "*", and adds Origin to a Vary the participant sent', async () => {
    const upstream = (current.upstream = await startRecordingUpstream((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json', vary: 'Accept-Encoding' }).end('{}');
    }));
    const gw = (current.gw = await startGateway(upstream.url, { cors: { enabled: true, origins: ['*'] } }));
    const answer = await fetch(`${gw.url}/v2/parties`, { headers: gw.auth({ origin: 'https://any.example' }) });
    expect(answer.headers.get('access-control-allow-origin')).toBe('*');
    expect(answer.headers.get('vary')).toBe('Accept-Encoding, Origin');
  });
});

describe('CORS: what a browser script may read', () => {
  it('exposes Retry-After by default, so that browser code can wait as a 429 says', async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url, {
      cors: { enabled: true, origins: ['https://app.example'] },
      protection: { operations: { 'getV2StateLedger-end': { rate: { requests: 1, perSeconds: 60 } } } },
    }));
    const call = () => fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth({ origin: 'https://app.example' }) });
    expect((await call()).status).toBe(200);
    const limited = await call();
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    const exposed = (limited.headers.get('access-control-expose-headers') ?? '').split(/,\s*/);
    expect(exposed).toEqual(expect.arrayContaining(['retry-after', 'x-request-id']));
  });
});
